#include "fsck.h"

#include <exception>
#include <utility>
#include <vector>

#include "store.h"

namespace diode::hub {

int fsck(const std::string& dir, bool repair, std::ostream& out) {
  try {
    Store::Options so;
    so.dir = dir;
    so.read_only = !repair;
    Store store(so);
    std::vector<std::pair<ShardRow, std::string>> bad;
    uint64_t checked = 0, records = 0;
    for (const auto& row : store.all_shards()) {
      ++checked;
      try {
        records += store.read_verified(row).records.size();
      } catch (const std::exception& e) {
        bad.emplace_back(row, e.what());
        out << "corrupt shard " << row.id << " (hardware " << row.hardware_key << ", segment " << row.segment
            << ", offset " << row.offset << ", " << row.length << " bytes): " << e.what() << "\n";
      }
    }
    out << "checked " << checked << " shards (" << records << " records in sound ones): " << bad.size() << " corrupt\n";
    if (bad.empty()) return 0;
    if (!repair) {
      out << "run with --repair (hub stopped) to quarantine them\n";
      return 1;
    }
    for (const auto& [row, why] : bad)
      out << "quarantined " << row.id << " -> " << store.quarantine(row, why) << "\n";
    return 0;
  } catch (const std::exception& e) {
    out << "fsck of " << dir << " failed: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace diode::hub
