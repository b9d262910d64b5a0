// The coordinator tests' one server-thread fixture: a fleet::Server over a
// fresh SQLite file, serving on an ipc:// endpoint from its own thread, and
// CURVE DEALER clients for it. A test fixture derives from ::testing::Test and
// ServerFixture, seeds `store` between open_store() and start_server(), and
// calls stop_server() in TearDown (the destructor does it too).
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "diode/zmq_security.h"
#include "server.h"

namespace diode::fleet::test_support {

class ServerFixture {
 protected:
  explicit ServerFixture(std::string db_path) : db(std::move(db_path)), endpoint("ipc://" + db + ".sock") {}
  ~ServerFixture() { stop_server(); }
  ServerFixture(const ServerFixture&) = delete;
  ServerFixture& operator=(const ServerFixture&) = delete;

  // A new, empty store at `db` (files of an earlier run are removed first).
  void open_store() {
    remove_db_files();
    store = std::make_unique<Store>(db, false);
  }
  // Serves `store` on `endpoint` with `server_keys` (cfg.bind and cfg.keys are set here).
  void start_server(ServerConfig cfg) {
    cfg.bind = endpoint;
    cfg.keys = server_keys;
    stop = false;
    server = std::make_unique<Server>(*store, cfg);
    thread = std::thread([this] { server->run(stop); });
  }
  // Stops the server thread, closes the store and removes its files; idempotent.
  void stop_server() {
    if (thread.joinable()) {
      stop = true;
      thread.join();
    }
    server.reset();
    if (store) {
      store.reset();
      remove_db_files();
    }
  }
  // A CURVE DEALER connected to the server as `kp`.
  zmq::socket_t dealer(const net::CurveKeyPair& kp) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    net::make_curve_client(s, kp, server_keys.public_z85);
    s.connect(endpoint);
    return s;
  }

  std::string db, endpoint;
  net::CurveKeyPair server_keys = net::generate_curve_keypair();
  std::atomic<bool> stop{false};
  std::unique_ptr<Store> store;
  std::unique_ptr<Server> server;
  std::thread thread;
  zmq::context_t ctx{1};

 private:
  void remove_db_files() {
    for (const char* sfx : {"", "-wal", "-shm"}) std::filesystem::remove(db + sfx);
  }
};

}  // namespace diode::fleet::test_support
