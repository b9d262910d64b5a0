// A minimal DIODE-INGEST/1 server for the fleet tests, used when the real
// diode-hub is not available: verifies each shard, stores it durably
// (write_file_atomic: fsync + rename + fsync dir) as <dir>/<sha256(id)>.msgpack,
// answers "duplicate" for a shard id it already holds with the same hash and
// "conflict" for different content. `--unavailable-file F`: while F exists it
// answers ERR unavailable (simulates an outage without losing the socket).
// `--reject CODE:MESSAGE`: answers every push ERR CODE MESSAGE (a permanent
// rejection such as "invalid_shard:shard.records[0].median_us: implausibly slow").
// `--push-log F`: appends one line per PUSH received (the shard id, or "?").
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "diode/io.h"
#include "diode/sha256.h"
#include "diode/wire.h"
#include "diode/zmq_security.h"
#include "protocol.h"

using namespace diode;
namespace fs = std::filesystem;

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fake DIODE-INGEST/1 hub for tests"};
  std::string bind, keys, allowlist, dir, unavailable_file, reject, push_log;
  app.add_option("--bind", bind)->required();
  app.add_option("--keys", keys)->required();
  app.add_option("--allowlist", allowlist)->required();
  app.add_option("--dir", dir)->required();
  app.add_option("--unavailable-file", unavailable_file);
  app.add_option("--reject", reject, "CODE:MESSAGE answered to every push");
  app.add_option("--push-log", push_log, "Append each pushed shard id to this file");
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  fs::create_directories(dir);

  zmq::context_t ctx(1);
  net::ZapAuthenticator zap(ctx, net::load_allowlist(allowlist));
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::maxmsgsize, int64_t{257} << 20);
  router.set(zmq::sockopt::linger, 0);
  net::make_curve_server(router, net::load_curve_keypair(keys));
  router.bind(bind);
  uint64_t stored = 0, dups = 0;
  while (!g_stop) {
    if (!fleet::poll_readable(router, 100)) continue;
    auto f = fleet::recv_frames(router, true, 8);
    if (!f || f->size() < 2) continue;
    // The ingest protocol has no empty delimiter; one is tolerated and echoed.
    bool delimited = (*f)[1].empty();
    fleet::Frames req(delimited ? f->begin() + 2 : f->begin() + 1, f->end());
    fleet::Frames rep{(*f)[0], fleet::kIngestProto};
    if (delimited) rep.insert(rep.begin() + 1, "");
    auto err = [&](const std::string& rid, const std::string& code, const std::string& msg) {
      rep.insert(rep.end(), {"ERR", rid, code, msg});
    };
    if (!push_log.empty() && req.size() == 4 && req[0] == fleet::kIngestProto && req[1] == "PUSH") {
      std::string id = "?";
      try {
        id = wire::decode_shard(req[3]).id;
      } catch (const std::exception&) {
      }
      std::ofstream(push_log, std::ios::app) << id << "\n";
    }
    if (req.size() == 3 && req[0] == fleet::kIngestProto && req[1] == "PING") {
      rep.insert(rep.end(), {"PONG", req[2]});
    } else if (req.size() != 4 || req[0] != fleet::kIngestProto || req[1] != "PUSH" || req[2].empty() ||
               req[2].size() > 64) {
      err(req.size() >= 3 ? req[2].substr(0, 64) : "", "bad_frame", "expected [DIODE-INGEST/1, PUSH, id, shard]");
    } else if (!reject.empty()) {
      auto colon = reject.find(':');
      err(req[2], reject.substr(0, colon), colon == std::string::npos ? "rejected" : reject.substr(colon + 1));
    } else if (!unavailable_file.empty() && fs::exists(unavailable_file)) {
      err(req[2], "unavailable", "simulated outage");
    } else {
      try {
        Shard s = wire::decode_shard(req[3]);
        std::string path = (fs::path(dir) / (to_hex(sha256(s.id)).substr(0, 32) + ".msgpack")).string();
        if (fs::exists(path)) {
          Shard old = wire::decode_shard(io::read_file(path));
          if (old.sha256 == s.sha256) {
            ++dups;
            rep.insert(rep.end(), {"ACK", req[2], s.id, "duplicate"});
          } else {
            err(req[2], "conflict", "shard " + s.id + " is already stored with other content");
          }
        } else {
          io::write_file_atomic(path, req[3]);
          ++stored;
          rep.insert(rep.end(), {"ACK", req[2], s.id, "stored"});
        }
      } catch (const std::exception& e) {
        err(req[2], "invalid_shard", e.what());
      }
    }
    fleet::send_frames(router, rep);
  }
  spdlog::info("fake hub: {} stored, {} duplicates", stored, dups);
  return 0;
}
