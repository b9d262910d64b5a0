// Durable hub ingest vs raw ZeroMQ push/pull of the same bytes, same run.
//
//   hub_ingest_bench [--shards N] [--records R] [--clients C] [--window W]
//                    [--workers K] [--dir DIR] [--hub PATH] [--storage]
//
// 1. decode: wire::decode_shard on one core (the per-shard CPU floor), and
//    under it msgpack-cxx's parse alone (null visitor) and SHA-256 alone;
//    --decode-only stops there (for profilers);
// 2. raw:    C PUSH sockets -> one PULL socket, CURVE on and off;
// 3. hub:    C DEALER agents, W pushes in flight each, against a fresh
//            diode-hub; timed until every shard is ACKed "stored" (fsync'd).
// --storage adds the experiment behind the store's design: shard bytes as
// SQLite BLOBs (WAL, synchronous=FULL) vs an append-only segment + fdatasync
// + a catalog row, same batches.
// Results go to bench/RESULTS.md, section "Hub ingest (issue 5)".
#include <fcntl.h>
#include <sqlite3.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <msgpack.hpp>
#include <thread>

#include "../hub/tests/support.h"
#include "diode/sha256.h"
#include "diode/zmq_security.h"
#include "store.h"

namespace fs = std::filesystem;
using namespace diode;
namespace tk = diode::hub::testkit;
using SteadyClock = std::chrono::steady_clock;

namespace {

double seconds_since(SteadyClock::time_point t) { return std::chrono::duration<double>(SteadyClock::now() - t).count(); }

// Raw ZeroMQ: the same frames, no decoding, no storage, no replies.
double raw_push_pull(const std::vector<std::string>& shards, size_t clients, bool curve) {
  zmq::context_t ctx(2);
  std::unique_ptr<net::ZapAuthenticator> zap;
  auto server = net::generate_curve_keypair();
  std::vector<net::CurveKeyPair> keys(clients);
  std::set<std::string> allow;
  for (auto& k : keys) allow.insert((k = net::generate_curve_keypair()).public_z85);
  if (curve) zap = std::make_unique<net::ZapAuthenticator>(ctx, allow);
  zmq::socket_t pull(ctx, zmq::socket_type::pull);
  if (curve) net::make_curve_server(pull, server);
  pull.bind("tcp://127.0.0.1:*");
  const std::string ep = pull.get(zmq::sockopt::last_endpoint);
  std::atomic<bool> go{false};
  std::vector<std::thread> senders;
  for (size_t c = 0; c < clients; ++c)
    senders.emplace_back([&, c] {
      zmq::socket_t push(ctx, zmq::socket_type::push);
      if (curve) net::make_curve_client(push, keys[c], server.public_z85);
      push.connect(ep);
      while (!go) std::this_thread::yield();
      for (size_t i = c; i < shards.size(); i += clients) push.send(zmq::buffer(shards[i]), zmq::send_flags::none);
      push.set(zmq::sockopt::linger, -1);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the handshakes finish
  auto t0 = SteadyClock::now();
  go = true;
  size_t bytes = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    zmq::message_t m;
    (void)pull.recv(m);
    bytes += m.size();
  }
  double s = seconds_since(t0);
  for (auto& t : senders) t.join();
  return s;
}

struct HubRun {
  double seconds = 0;
  size_t stored = 0, errors = 0;
  std::string first_error;
};

HubRun hub_ingest(const std::vector<std::string>& shards, size_t clients, size_t window, const std::string& dir,
                  const std::string& hub_bin, unsigned workers) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto keys = tk::make_keys(dir, clients);
  const std::string ep = "tcp://127.0.0.1:" + std::to_string(tk::free_tcp_port());
  tk::HubProcess hub(hub_bin, {"--data", dir + "/data", "--ingest", ep, "--http", "127.0.0.1:0", "--server-key",
                               keys.server_file, "--allowlist", keys.allowlist_file, "--ready-file",
                               dir + "/ready.json", "--workers", std::to_string(workers), "--log-level", "warn"});
  hub.start(dir + "/ready.json");
  zmq::context_t ctx(2);
  std::vector<std::unique_ptr<tk::IngestClient>> agents;
  for (size_t c = 0; c < clients; ++c) {
    agents.push_back(std::make_unique<tk::IngestClient>(ctx, ep, keys.clients[c], keys.server.public_z85));
    agents.back()->send({"DIODE-INGEST/1", "PING", "warmup"});
    if (!agents.back()->recv(5000)) throw std::runtime_error("hub does not answer PING");
  }
  HubRun run;
  std::mutex mu;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (size_t c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      auto& a = *agents[c];
      std::vector<size_t> mine;
      for (size_t i = c; i < shards.size(); i += clients) mine.push_back(i);
      while (!go) std::this_thread::yield();
      size_t sent = 0, done = 0;
      while (done < mine.size()) {
        while (sent < mine.size() && sent - done < window) {
          a.push(std::to_string(mine[sent]), shards[mine[sent]]);
          ++sent;
        }
        auto r = a.recv(60000);
        if (!r) throw std::runtime_error("hub reply timed out");
        ++done;
        std::lock_guard<std::mutex> lock(mu);
        if (r->at(1) == "ACK" && r->at(4) == "stored") run.stored++;
        else if (run.errors++ == 0) run.first_error = r->at(1) + " " + r->at(3) + " " + (r->size() > 4 ? r->at(4) : "");
      }
    });
  auto t0 = SteadyClock::now();
  go = true;
  for (auto& t : threads) t.join();
  run.seconds = seconds_since(t0);
  agents.clear();
  hub.kill(SIGTERM);
  return run;
}

// Stores the shards in batches of `batch` either as BLOBs in the catalog or
// appended to a segment file (fdatasync per batch) with only a row in SQLite.
double storage_run(const std::vector<std::string>& shards, size_t batch, bool blobs, const std::string& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  sqlite3* db = nullptr;
  sqlite3_open((dir + "/c.sqlite").c_str(), &db);
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
               "CREATE TABLE s(id TEXT PRIMARY KEY, off INTEGER, len INTEGER, data BLOB)",
               nullptr, nullptr, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO s VALUES(?1, ?2, ?3, ?4)", -1, &st, nullptr);
  int fd = ::open((dir + "/seg").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  uint64_t off = 0;
  auto t0 = SteadyClock::now();
  for (size_t i = 0; i < shards.size(); i += batch) {
    const size_t end = std::min(shards.size(), i + batch);
    if (!blobs) {
      uint64_t o = off;
      for (size_t j = i; j < end; ++j) {
        if (::pwrite(fd, shards[j].data(), shards[j].size(), static_cast<off_t>(o)) < 0) throw std::runtime_error("pwrite");
        o += shards[j].size();
      }
      ::fdatasync(fd);
    }
    sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
    for (size_t j = i; j < end; ++j) {
      const std::string id = "s" + std::to_string(j);
      sqlite3_bind_text(st, 1, id.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, 2, static_cast<sqlite3_int64>(off));
      sqlite3_bind_int64(st, 3, static_cast<sqlite3_int64>(shards[j].size()));
      if (blobs) sqlite3_bind_blob(st, 4, shards[j].data(), static_cast<int>(shards[j].size()), SQLITE_STATIC);
      else sqlite3_bind_null(st, 4);
      sqlite3_step(st);
      sqlite3_reset(st);
      off += shards[j].size();
    }
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  }
  double s = seconds_since(t0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  ::close(fd);
  fs::remove_all(dir);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Durable hub ingest vs raw ZeroMQ"};
  size_t n = 400, records = 2500, clients = 4, window = 4;
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::string dir = (fs::temp_directory_path() / "diode-hub-bench").string(), hub_bin = DIODE_HUB_BINARY;
  app.add_option("--shards", n, "Shards to push")->capture_default_str();
  app.add_option("--records", records, "Records per shard")->capture_default_str();
  app.add_option("--clients", clients, "Concurrent agents")->capture_default_str();
  app.add_option("--window", window, "Pushes in flight per agent")->capture_default_str();
  app.add_option("--workers", workers, "Hub decode threads")->capture_default_str();
  app.add_option("--dir", dir, "Scratch directory (the hub's store goes here)")->capture_default_str();
  app.add_option("--hub", hub_bin, "diode-hub binary")->capture_default_str();
  bool storage = false, decode_only = false;
  app.add_flag("--storage", storage, "Also compare SQLite BLOB storage with segment files");
  app.add_flag("--decode-only", decode_only, "Only time wire::decode_shard (1 core), e.g. under a profiler");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> shards;
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    shards.push_back(wire::encode(tk::make_shard("bench-" + std::to_string(i), records, i + 1)));
    bytes += shards.back().size();
  }
  const double total_records = double(n) * double(records), mb = double(bytes) / 1e6;
  std::printf("%zu shards x %zu records = %.0f records, %.1f MB (%.1f bytes/record); %zu agents, window %zu, %u hub workers\n",
              n, records, total_records, mb, double(bytes) / total_records, clients, window, workers);

  // Best of 3 passes over (up to) 100 shards: the per-shard CPU floor.
  double decode_s = 1e30;
  size_t check = 0, canonical = 0;
  for (int pass = 0; pass < 3; ++pass) {
    auto t0 = SteadyClock::now();
    check = canonical = 0;
    for (size_t i = 0; i < std::min<size_t>(n, 100); ++i) {
      wire::ShardDecodeInfo info;
      check += wire::decode_shard_with_info(shards[i], info).records.size();
      canonical += info.canonical_input;
    }
    decode_s = std::min(decode_s, seconds_since(t0));
  }
  std::printf("decode_shard, 1 core:    %12.0f records/s  %8.1f MB/s  (%zu of %zu hashed as received)\n",
              double(check) / decode_s, double(check) / total_records * mb / decode_s, canonical,
              std::min<size_t>(n, 100));
  // The floors under any decoder built on msgpack-cxx's parser: the parse
  // alone (a visitor that does nothing) and SHA-256 of the bytes.
  {
    double parse_s = 1e30, hash_s = 1e30;
    for (int pass = 0; pass < 3; ++pass) {
      auto t1 = SteadyClock::now();
      for (size_t i = 0; i < std::min<size_t>(n, 100); ++i) {
        msgpack::null_visitor v;
        if (!msgpack::parse(shards[i].data(), shards[i].size(), v)) throw std::runtime_error("parse failed");
      }
      parse_s = std::min(parse_s, seconds_since(t1));
      t1 = SteadyClock::now();
      for (size_t i = 0; i < std::min<size_t>(n, 100); ++i) (void)sha256(shards[i]);
      hash_s = std::min(hash_s, seconds_since(t1));
    }
    std::printf("  msgpack::parse, null visitor: %12.0f records/s\n", double(check) / parse_s);
    std::printf("  SHA-256 of the bytes:         %12.0f records/s\n", double(check) / hash_s);
  }
  if (decode_only) return 0;

  double raw_plain = raw_push_pull(shards, clients, false);
  double raw_curve = raw_push_pull(shards, clients, true);
  HubRun hub = hub_ingest(shards, clients, window, dir, hub_bin, workers);
  if (hub.stored != n) {
    std::fprintf(stderr, "hub stored %zu of %zu shards (%zu errors; first: %s)\n", hub.stored, n, hub.errors,
                 hub.first_error.c_str());
    return 1;
  }
  std::printf("\n%-34s %14s %10s %8s %8s\n", "path", "records/s", "MB/s", "seconds", "vs curve");
  auto row = [&](const char* name, double s) {
    std::printf("%-34s %14.0f %10.1f %8.3f %7.0f%%\n", name, total_records / s, mb / s, s, 100.0 * raw_curve / s);
  };
  row("raw ZeroMQ push/pull (plain)", raw_plain);
  row("raw ZeroMQ push/pull (CURVE)", raw_curve);
  row("diode-hub durable ingest (CURVE)", hub.seconds);
  std::printf("\nhub / raw CURVE = %.2f, hub / raw plain = %.2f\n", raw_curve / hub.seconds, raw_plain / hub.seconds);
  if (storage) {
    const size_t batch = 16;
    double b = storage_run(shards, batch, true, dir + "-storage");
    double g = storage_run(shards, batch, false, dir + "-storage");
    std::printf("\nstorage only, batches of %zu shards:\n", batch);
    std::printf("%-34s %14.0f %10.1f %8.3f\n", "SQLite BLOBs (WAL, FULL)", total_records / b, mb / b, b);
    std::printf("%-34s %14.0f %10.1f %8.3f\n", "segment + fdatasync + catalog row", total_records / g, mb / g, g);
  }
  fs::remove_all(dir);
  return 0;
}
