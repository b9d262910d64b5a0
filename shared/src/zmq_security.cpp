#include "diode/zmq_security.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "diode/io.h"

namespace diode::net {

bool is_valid_z85_key(const std::string& key) {
  if (key.size() != 40) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, key.c_str()) != nullptr;
}

CurveKeyPair generate_curve_keypair() {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    throw std::runtime_error("zmq_curve_keypair failed: libzmq built without CURVE (libsodium)?");
  return {pub, sec};
}

CurveKeyPair load_curve_keypair(const std::string& path) {
  std::string text = io::read_file(path, 4096);
  {
    // A .pub file: the bare Z85 public key (surrounding whitespace ignored). Decided by the
    // key itself, not its first character: '{' is a Z85 digit, so 1 key in 85 starts with
    // one (a JSON key file never is a valid key: '"' is not a Z85 digit).
    size_t b = text.find_first_not_of(" \t\r\n"), e = text.find_last_not_of(" \t\r\n");
    if (b != std::string::npos) {
      std::string key = text.substr(b, e - b + 1);
      if (is_valid_z85_key(key)) return {key, {}};
      if (text[b] != '{')
        throw std::runtime_error(path + ": neither a JSON key file nor a 40-character Z85 public key");
    }
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not a key file (" + e.what() + ")");
  }
  CurveKeyPair kp;
  if (!j.is_object() || !j.contains("public") || !j["public"].is_string())
    throw std::runtime_error(path + ": key file needs a \"public\" string");
  kp.public_z85 = j["public"].get<std::string>();
  if (j.contains("secret")) {
    if (!j["secret"].is_string()) throw std::runtime_error(path + ": \"secret\" must be a string");
    kp.secret_z85 = j["secret"].get<std::string>();
    if (!is_valid_z85_key(kp.secret_z85)) throw std::runtime_error(path + ": secret is not a 40-character Z85 key");
  }
  if (!is_valid_z85_key(kp.public_z85)) throw std::runtime_error(path + ": public is not a 40-character Z85 key");
  return kp;
}

void save_curve_keypair(const std::string& path, const CurveKeyPair& kp) {
  nlohmann::json j{{"public", kp.public_z85}};
  if (!kp.secret_z85.empty()) j["secret"] = kp.secret_z85;
  io::write_file_atomic(path, j.dump(1) + "\n");
  if (!kp.secret_z85.empty()) ::chmod(path.c_str(), 0600);
}

std::string create_curve_key_file(const std::string& path, std::ostream* note) {
  CurveKeyPair kp = generate_curve_keypair();
  save_curve_keypair(path, kp);
  const std::string pub = public_key_file(path);
  io::write_file_atomic(pub, kp.public_z85 + "\n");
  ::chmod(pub.c_str(), 0644);
  if (note) *note << "wrote " << path << " (key pair, mode 0600) and " << pub << " (public key)\n";
  return kp.public_z85;
}

std::set<std::string> load_allowlist(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open allowlist " + path);
  std::set<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    // "KEY [label...]". Z85 uses '#', so a comment is a line whose first token
    // starts with '#' and is not itself a key.
    std::istringstream tokens(line);
    std::string key;
    if (!(tokens >> key)) continue;
    if (is_valid_z85_key(key)) {
      keys.insert(key);
      continue;
    }
    if (key[0] == '#') continue;
    throw std::runtime_error(path + ":" + std::to_string(n) + ": not a 40-character Z85 public key");
  }
  return keys;
}

ZapAuthenticator::ZapAuthenticator(zmq::context_t& ctx, std::set<std::string> allowed)
    : socket_(ctx, zmq::socket_type::rep), allowed_(std::move(allowed)) {
  socket_.bind("inproc://zeromq.zap.01");
  socket_.set(zmq::sockopt::rcvtimeo, 100);  // wake up to notice stop_
  thread_ = std::thread([this] { run(); });
}

ZapAuthenticator::~ZapAuthenticator() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ZapAuthenticator::set_allowlist(std::set<std::string> allowed) {
  std::lock_guard<std::mutex> lock(mu_);
  allowed_ = std::move(allowed);
}

void ZapAuthenticator::run() {
  while (!stop_) {
    std::vector<zmq::message_t> frames;
    try {
      zmq::message_t first;
      if (!socket_.recv(first)) continue;  // timeout
      frames.push_back(std::move(first));
      while (frames.back().more()) {
        zmq::message_t next;
        (void)socket_.recv(next);
        frames.push_back(std::move(next));
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::warn("zap: receive failed: {}", e.what());
      continue;
    }
    // Request: version, request_id, domain, address, identity, mechanism, credentials...
    std::string request_id = frames.size() > 1 ? frames[1].to_string() : "";
    std::string address = frames.size() > 3 ? frames[3].to_string() : "?";
    std::string mechanism = frames.size() > 5 ? frames[5].to_string() : "";
    bool ok = false;
    std::string client_key;
    if (frames.size() >= 7 && frames[0].to_string() == "1.0" && mechanism == "CURVE" && frames[6].size() == 32) {
      char z85[41];
      zmq_z85_encode(z85, static_cast<const uint8_t*>(frames[6].data()), 32);
      client_key = z85;
      std::lock_guard<std::mutex> lock(mu_);
      ok = allowed_.count(client_key) > 0;
    }
    if (ok) {
      ++admitted_;
    } else {
      ++refused_;
      spdlog::warn("refused {} connection from {} with unknown key {}", mechanism, address,
                   client_key.empty() ? "(none)" : client_key);
    }
    const std::string code = ok ? "200" : "400", text = ok ? "OK" : "key not in allowlist";
    try {
      socket_.send(zmq::buffer(std::string("1.0")), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(code), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(text), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(ok ? client_key : std::string()), zmq::send_flags::sndmore);
      socket_.send(zmq::message_t(), zmq::send_flags::none);  // metadata
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::warn("zap: reply failed: {}", e.what());
    }
  }
}

void make_curve_server(zmq::socket_t& s, const CurveKeyPair& server) {
  if (server.secret_z85.empty()) throw std::runtime_error("CURVE server needs its secret key");
  s.set(zmq::sockopt::zap_domain, "diode");
  s.set(zmq::sockopt::curve_server, true);
  s.set(zmq::sockopt::curve_secretkey, server.secret_z85);
  s.set(zmq::sockopt::curve_publickey, server.public_z85);
}

void make_curve_client(zmq::socket_t& s, const CurveKeyPair& client, const std::string& server_public_z85) {
  if (client.secret_z85.empty()) throw std::runtime_error("CURVE client needs its secret key");
  if (!is_valid_z85_key(server_public_z85)) throw std::runtime_error("server public key is not a 40-character Z85 key");
  s.set(zmq::sockopt::curve_serverkey, server_public_z85);
  s.set(zmq::sockopt::curve_publickey, client.public_z85);
  s.set(zmq::sockopt::curve_secretkey, client.secret_z85);
}

}  // namespace diode::net
