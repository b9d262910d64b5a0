// `diode` subcommands of the coordinator (registered from cli/main.cpp):
//   diode manifest validate FILE...    precise errors (file:line:col: field: message)
//   diode manifest shards FILE         the deterministic shard expansion
//   diode manifest submit FILE --coordinator EP --keys K --server-key S   add to a running coordinator
//   diode status --coordinator EP ...  or  diode status --db FILE
//   diode requeue --manifest NAME (--shard ID | --failed) --coordinator EP ...
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "../../cli/commands.h"
#include "diode/clock.h"
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

using fleet::Frames;

// One request to a running coordinator over CURVE, as STATUS always did: our
// key pair must be in the coordinator's allowlist. Returns the reply frames
// after the protocol frame (REPLY, request_id, args...); an ERR reply throws
// with its code and message.
Frames coordinator_request(const std::string& endpoint, const std::string& keys_path, const std::string& server_key,
                           int timeout_ms, const std::string& cmd, const Frames& args) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::maxmsgsize, int64_t{64} << 20);
  std::string server_pub = server_key;
  if (!net::is_valid_z85_key(server_pub)) server_pub = net::load_curve_keypair(server_key).public_z85;
  net::make_curve_client(s, net::load_curve_keypair(keys_path), server_pub);
  s.connect(endpoint);
  const std::string rid = cmd + "-1";
  Frames req{"", fleet::kCoordProto, cmd, rid};
  req.insert(req.end(), args.begin(), args.end());
  fleet::send_frames(s, req);
  if (!fleet::poll_readable(s, timeout_ms))
    throw std::runtime_error("no reply from " + endpoint + " within " + std::to_string(timeout_ms) +
                             " ms (down, or our key is not in its allowlist?)");
  auto f = fleet::recv_frames(s, true);
  if (!f || f->size() < 4 || (*f)[1] != fleet::kCoordProto) throw std::runtime_error("unexpected reply from " + endpoint);
  if ((*f)[2] == "ERR")
    throw std::runtime_error(endpoint + " refused " + cmd + (f->size() >= 6 ? ": " + (*f)[4] + ": " + (*f)[5] : ""));
  return Frames(f->begin() + 2, f->end());
}

// --coordinator/--keys/--server-key/--timeout-ms, shared by status, requeue and manifest submit.
struct Remote {
  std::string endpoint, keys, server_key;
  int timeout_ms = 5000;
  void add(CLI::App* cmd, bool required) {
    auto* e = cmd->add_option("--coordinator", endpoint, "Coordinator endpoint (tcp://127.0.0.1:5555)");
    auto* k = cmd->add_option("--keys", keys, "Our CURVE key pair (must be in the coordinator's allowlist)");
    auto* sk = cmd->add_option("--server-key", server_key, "Coordinator public key (Z85) or its key file (FILE.pub)");
    if (required) {
      e->required();
      k->required();
      sk->required();
    }
    cmd->add_option("--timeout-ms", timeout_ms, "Reply timeout")->capture_default_str();
  }
  Frames request(const std::string& cmd, const Frames& args) const {
    return coordinator_request(endpoint, keys, server_key, timeout_ms, cmd, args);
  }
};

// "hardware key nvidia-h100-80gb (...)" or "hardware key: not one key (...)".
std::string hardware_key_line(const fleet::Manifest& m) {
  std::string why;
  auto key = fleet::resolve_hardware_key(m.hardware, &why);
  if (!key)
    return "hardware key: not one key: " + why + " (rules: " + fleet::hardware_rules_text(m.hardware) + ")";
  if (!m.hardware.key.empty())
    return "hardware key " + *key + " (named by hardware.key: only a GPU of exactly this key matches)";
  char gib[32];
  std::snprintf(gib, sizeof gib, "%g", static_cast<double>(m.hardware.min_memory_bytes) / double(1ull << 30));
  return "hardware key " + *key + " (of a device named '" + m.hardware.device_pattern + "' with min_memory_gib " + gib +
         "; a longer driver name or more memory also matches and gets another key: `diode hardware key` tells)";
}

}  // namespace

void register_coordinator_commands(CLI::App& app) {
  auto* manifest = app.add_subcommand("manifest", "Hardware support requests (manifests/README.md)");
  manifest->require_subcommand(1);

  auto* validate = manifest->add_subcommand("validate", "Check manifests (files, or directories of *.yaml) against the schema");
  static std::vector<std::string> files;
  validate->add_option("files", files, "Manifest YAML files or directories")->required();
  validate->callback([] {
    std::vector<std::string> errors;
    std::vector<std::string> all;
    for (const auto& f : files) {
      if (!std::filesystem::is_directory(f)) {
        all.push_back(f);
        continue;
      }
      size_t before = all.size();
      for (const auto& e : std::filesystem::directory_iterator(f))
        if (e.is_regular_file() && e.path().extension() == ".yaml") all.push_back(e.path().string());
      std::sort(all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
      if (all.size() == before) errors.push_back(f + ": no *.yaml file in this directory");
    }
    for (const auto& f : all) {
      try {
        fleet::Manifest m = fleet::load_manifest(f);
        std::cout << "ok " << f << ": " << m.name << ", " << m.problems << " problems in " << m.shard_count()
                  << " shards of " << m.problems_per_shard << (m.scheduled ? "" : ", unscheduled")
                  << (m.family == "gemm" ? "" : ", family " + m.family) << "\n"
                  << "   " << hardware_key_line(m) << "\n";
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

  auto* submit = manifest->add_subcommand(
      "submit", "Add a manifest to a running coordinator (validated there like at start; an identical one is a no-op)");
  static std::string submit_file;
  static Remote submit_remote;
  submit->add_option("file", submit_file, "Manifest YAML file")->required();
  submit_remote.add(submit, true);
  submit->callback([] {
    fleet::Manifest m = fleet::load_manifest(submit_file);  // the same errors here, before any network
    std::string name = std::filesystem::path(submit_file).filename().string();
    Frames r = submit_remote.request("SUBMIT", {name, m.source});
    if (r.size() != 5 || r[0] != "SUBMIT-OK") throw std::runtime_error("unexpected reply to SUBMIT");
    if (r[2] == "added") std::cout << "added manifest " << r[3] << ": " << r[4] << " shards\n";
    else std::cout << "manifest " << r[3] << " is already loaded, unchanged (" << r[4] << " shards): nothing to do\n";
  });

  auto* status = app.add_subcommand("status", "Progress of every manifest, live agents, throughput, ETA");
  static Remote status_remote;
  static std::string db;
  static bool as_json = false;
  status_remote.add(status, false);
  status->add_option("--db", db, "Read the coordinator's SQLite database directly instead");
  status->add_flag("--json", as_json, "Print the raw status JSON");
  status->callback([] {
    nlohmann::json st;
    if (!db.empty()) {
      // Never create a database here: a typo would show an empty fleet.
      if (!std::filesystem::is_regular_file(db)) throw std::runtime_error(db + ": no such coordinator database");
      fleet::Store store(db, false);
      st = store.status(static_cast<int64_t>(wall_now_ms()), 3 * 5000);
    } else {
      if (status_remote.endpoint.empty() || status_remote.keys.empty() || status_remote.server_key.empty())
        throw std::runtime_error("give --db FILE, or --coordinator ENDPOINT with --keys and --server-key");
      Frames r = status_remote.request("STATUS", {});
      if (r.size() != 3 || r[0] != "STATUS-OK") throw std::runtime_error("unexpected reply to STATUS");
      st = nlohmann::json::parse(r[2]);
    }
    if (as_json) std::cout << st.dump(1) << "\n";
    else std::cout << fleet::render_status(st);
  });

  auto* requeue = app.add_subcommand("requeue", "Put failed shards of a manifest back to pending (attempts reset)");
  static Remote requeue_remote;
  static std::string rq_manifest, rq_shard;
  static bool rq_failed = false;
  requeue->add_option("--manifest", rq_manifest, "Manifest name")->required();
  auto* o_shard = requeue->add_option("--shard", rq_shard, "One failed shard id (e.g. h100-mm-v1/s000042)");
  auto* o_failed = requeue->add_flag("--failed", rq_failed, "Every failed shard of the manifest");
  o_shard->excludes(o_failed);
  o_failed->excludes(o_shard);
  requeue_remote.add(requeue, true);
  requeue->callback([] {
    if (rq_shard.empty() && !rq_failed) throw std::runtime_error("give --shard ID or --failed");
    Frames r = requeue_remote.request("REQUEUE", {rq_manifest, rq_shard});
    if (r.size() != 3 || r[0] != "REQUEUE-OK") throw std::runtime_error("unexpected reply to REQUEUE");
    std::cout << "requeued " << r[2] << " failed shard(s) of " << rq_manifest << "\n";
  });
}

}  // namespace diode::cli
