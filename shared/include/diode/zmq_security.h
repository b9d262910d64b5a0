// CurveZMQ on every socket, agents admitted by public key from an allowlist.
// The allowlist is enforced by a ZAP handler (ZeroMQ RFC 27) running on the
// socket's context: libzmq asks it about every CURVE handshake and drops the
// connection when it answers 400. Refusals are counted and logged.
#pragma once

#include <atomic>
#include <mutex>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

namespace diode::net {

struct CurveKeyPair {
  std::string public_z85;  // 40 Z85 characters
  std::string secret_z85;
};

CurveKeyPair generate_curve_keypair();
// Key files are JSON {"public": "...", "secret": "..."} written with mode 0600;
// a public-only file ({"public": "..."}, or a .pub file: the bare Z85 key on
// one line) loads with an empty secret.
CurveKeyPair load_curve_keypair(const std::string& path);
void save_curve_keypair(const std::string& path, const CurveKeyPair& kp);
// The keygen of every daemon (diode-hub keygen, diode-coordinator keygen,
// diode-agent keygen): generates a key pair, saves it to `path` (JSON, mode
// 0600) and its public key to `path + ".pub"` (the Z85 key and a newline, mode
// 0644: what --hub-key/--coordinator-key/--server-key take, as the key or the
// file, and what an allowlist line starts with). Returns the public key (the
// daemons print it on stdout, so `$(diode-agent keygen F)` is the key) and
// tells `note` (stderr unless given; nullptr: silent) the two paths written.
std::string create_curve_key_file(const std::string& path, std::ostream* note = &std::cerr);
inline std::string public_key_file(const std::string& key_file) { return key_file + ".pub"; }
// One Z85 public key per line, optionally followed by a label ("KEY node-1");
// blank lines and lines starting with '#' (that are not keys) are ignored. Any
// other line is an error naming file and line.
std::set<std::string> load_allowlist(const std::string& path);
bool is_valid_z85_key(const std::string& key);

class ZapAuthenticator {
 public:
  // Binds inproc://zeromq.zap.01 on `ctx`; construct before binding any
  // CURVE server socket on that context. An empty allowlist refuses everyone.
  ZapAuthenticator(zmq::context_t& ctx, std::set<std::string> allowed_public_keys);
  ~ZapAuthenticator();
  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

  void set_allowlist(std::set<std::string> allowed_public_keys);
  uint64_t refused() const { return refused_.load(); }
  uint64_t admitted() const { return admitted_.load(); }

 private:
  void run();

  zmq::socket_t socket_;
  std::mutex mu_;
  std::set<std::string> allowed_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0}, admitted_{0};
  std::thread thread_;
};

// Makes `s` a CURVE server with our key pair; ZAP domain "diode".
void make_curve_server(zmq::socket_t& s, const CurveKeyPair& server);
// Makes `s` a CURVE client of a server whose public key is `server_public_z85`.
void make_curve_client(zmq::socket_t& s, const CurveKeyPair& client, const std::string& server_public_z85);

}  // namespace diode::net
