// `diode` subcommands of the coordinator (registered from cli/main.cpp):
//   diode manifest validate FILE...    precise errors (file:line:col: field: message)
//   diode manifest shards FILE         the deterministic shard expansion
//   diode status --coordinator EP ...  or  diode status --db FILE
#include <filesystem>
#include <iostream>

#include "../../cli/commands.h"
#include "diode/error.h"
#include "diode/sha256.h"
#include "diode/zmq_security.h"
#include "expand.h"
#include "manifest.h"
#include "protocol.h"
#include "status_view.h"
#include "store.h"

namespace diode::cli {

namespace {

nlohmann::json status_from_coordinator(const std::string& endpoint, const std::string& keys_path,
                                       const std::string& server_key, int timeout_ms) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::maxmsgsize, int64_t{64} << 20);
  std::string server_pub = server_key;
  if (!net::is_valid_z85_key(server_pub)) server_pub = net::load_curve_keypair(server_key).public_z85;
  net::make_curve_client(s, net::load_curve_keypair(keys_path), server_pub);
  s.connect(endpoint);
  fleet::send_frames(s, {"", fleet::kCoordProto, "STATUS", "status-1"});
  if (!fleet::poll_readable(s, timeout_ms))
    throw std::runtime_error("no reply from " + endpoint + " within " + std::to_string(timeout_ms) +
                             " ms (down, or our key is not in its allowlist?)");
  auto f = fleet::recv_frames(s, true);
  if (!f || f->size() != 5 || (*f)[2] != "STATUS-OK")
    throw std::runtime_error("unexpected reply from " + endpoint +
                             (f && f->size() >= 6 ? ": " + (*f)[4] + ": " + (*f)[5] : std::string()));
  return nlohmann::json::parse((*f)[4]);
}

}  // namespace

void register_coordinator_commands(CLI::App& app) {
  auto* manifest = app.add_subcommand("manifest", "Hardware support requests (manifests/README.md)");
  manifest->require_subcommand(1);

  auto* validate = manifest->add_subcommand("validate", "Check manifests against the schema");
  static std::vector<std::string> files;
  validate->add_option("files", files, "Manifest YAML files")->required();
  validate->callback([] {
    std::vector<std::string> errors;
    for (const auto& f : files) {
      try {
        fleet::Manifest m = fleet::load_manifest(f);
        std::cout << "ok " << f << ": " << m.name << ", " << m.problems << " problems in " << m.shard_count()
                  << " shards of " << m.problems_per_shard << (m.scheduled ? "" : ", unscheduled") << "\n";
      } catch (const fleet::ManifestError& e) {
        errors.insert(errors.end(), e.errors().begin(), e.errors().end());
      }
    }
    if (!errors.empty()) {
      for (const auto& e : errors) std::cerr << e << "\n";
      throw WireError(std::to_string(errors.size()) + " manifest error(s)");
    }
  });

  auto* shards = manifest->add_subcommand("shards", "Print the deterministic shard expansion of a manifest");
  static std::string shards_file;
  static bool shards_json = false;
  shards->add_option("file", shards_file, "Manifest YAML file")->required();
  shards->add_flag("--json", shards_json, "Print every shard spec as JSON lines");
  shards->callback([] {
    fleet::Manifest m = fleet::load_manifest(shards_file);
    for (const auto& plan : fleet::expand_shards(m)) {
      std::string spec = fleet::shard_spec(m, plan).dump();
      if (shards_json) std::cout << spec << "\n";
      else std::cout << plan.id << " " << plan.problems.size() << " " << to_hex(sha256(spec)) << "\n";
    }
  });

  auto* status = app.add_subcommand("status", "Progress of every manifest, live agents, throughput, ETA");
  static std::string endpoint, keys, server_key, db;
  static bool as_json = false;
  static int timeout_ms = 5000;
  status->add_option("--coordinator", endpoint, "Coordinator endpoint (tcp://host:5570)");
  status->add_option("--keys", keys, "Our CURVE key pair (must be in the coordinator's allowlist)");
  status->add_option("--server-key", server_key, "Coordinator public key (Z85) or its key file");
  status->add_option("--db", db, "Read the coordinator's SQLite database directly instead");
  status->add_option("--timeout-ms", timeout_ms, "Reply timeout")->capture_default_str();
  status->add_flag("--json", as_json, "Print the raw status JSON");
  status->callback([] {
    nlohmann::json st;
    if (!db.empty()) {
      // Never create a database here: a typo would show an empty fleet.
      if (!std::filesystem::is_regular_file(db)) throw std::runtime_error(db + ": no such coordinator database");
      fleet::Store store(db, false);
      st = store.status(fleet::now_ms(), 3 * 5000);
    } else {
      if (endpoint.empty() || keys.empty() || server_key.empty())
        throw std::runtime_error("give --db FILE, or --coordinator ENDPOINT with --keys and --server-key");
      st = status_from_coordinator(endpoint, keys, server_key, timeout_ms);
    }
    if (as_json) std::cout << st.dump(1) << "\n";
    else std::cout << fleet::render_status(st);
  });
}

}  // namespace diode::cli
