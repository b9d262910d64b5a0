// libFuzzer target for the JSON decoders (shard/problem/config JSON, the
// feature spec that travels in every model bundle).
#include <cstdint>
#include <string>

#include "diode/error.h"
#include "diode/features.h"
#include "diode/json.h"

using namespace diode;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  auto j = nlohmann::json::parse(reinterpret_cast<const char*>(data) + 1, reinterpret_cast<const char*>(data) + size,
                                 nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    switch (data[0] % 5) {
      case 0: (void)shard_from_json(j); break;
      case 1: (void)problem_from_json(j); break;
      case 2: (void)config_from_json(j); break;
      case 3: (void)record_from_json(j); break;
      case 4: (void)FeatureSpec::from_json(j); break;
    }
  } catch (const WireError&) {
  }
  return 0;
}
