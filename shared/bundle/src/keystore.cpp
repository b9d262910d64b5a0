#include "diode/bundle/keystore.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "diode/io.h"

namespace fs = std::filesystem;

namespace diode::bundle {

namespace {
std::map<std::string, PrivateKey> load_dir_keys(const fs::path& dir) {
  std::map<std::string, PrivateKey> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".key") continue;
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && (st.st_mode & 077) != 0)
      throw std::runtime_error(e.path().string() + " is readable by others (mode " +
                               std::to_string(st.st_mode & 0777) + "); chmod 600 it");
    PrivateKey k = PrivateKey::from_pem(io::read_file(e.path().string(), 64 << 10));
    out.emplace(k.public_key().keyid(), k);
  }
  return out;
}

std::map<std::string, PublicKey> pubs(const std::map<std::string, PrivateKey>& keys) {
  std::map<std::string, PublicKey> out;
  for (const auto& [id, k] : keys) out.emplace(id, k.public_key());
  return out;
}

std::map<std::string, PrivateKey> fresh(uint64_t n) {
  std::map<std::string, PrivateKey> out;
  for (uint64_t i = 0; i < n; ++i) {
    PrivateKey k = PrivateKey::generate();
    out.emplace(k.public_key().keyid(), k);
  }
  return out;
}

void save_keys(const fs::path& dir, const std::map<std::string, PrivateKey>& keys) {
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
  for (const auto& [id, k] : keys) write_secret_file((dir / (id + ".key")).string(), k.to_pem());
}

std::vector<PrivateKey> values(const std::map<std::string, PrivateKey>& m) {
  std::vector<PrivateKey> v;
  for (const auto& [id, k] : m) v.push_back(k);
  return v;
}

void write_root(const fs::path& dir, const json& env, const PublicKey& pin) {
  const uint64_t v = env["signed"]["version"].get<uint64_t>();
  fs::create_directories(dir / "roots");
  io::write_file_atomic((dir / "roots" / (std::to_string(v) + ".json")).string(), env.dump(2) + "\n");
  io::write_file_atomic((dir / "root.pub").string(), pin.hex() + "\n");
}
}  // namespace

std::string default_keys_dir() {
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/diode/keys";
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw std::runtime_error("HOME is not set; pass --keys DIR");
  return std::string(home) + "/.config/diode/keys";
}

void write_secret_file(const std::string& path, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot fsync " + path);
}

void keys_init(const std::string& dir, const KeyInitOptions& opt, std::time_t now) {
  const fs::path d(dir);
  if (fs::exists(d / "roots")) throw std::runtime_error(dir + " already holds keys; use `diode keys rotate`");
  if (opt.root_threshold < 1 || opt.root_threshold > opt.root_keys || opt.targets_threshold < 1 ||
      opt.targets_threshold > opt.targets_keys || opt.root_keys > kMaxKeysPerRole || opt.targets_keys > kMaxKeysPerRole)
    throw std::runtime_error("thresholds must be between 1 and the number of keys (at most 16)");
  fs::create_directories(d);
  fs::permissions(d, fs::perms::owner_all, fs::perm_options::replace);
  const auto root = fresh(opt.root_keys), targets = fresh(opt.targets_keys);
  save_keys(d / "root", root);
  save_keys(d / "targets", targets);
  const json s = make_root(1, now + opt.root_expires_days * 86400LL, pubs(root), opt.root_threshold, pubs(targets),
                           opt.targets_threshold);
  write_root(d, make_envelope(s, values(root)), root.begin()->second.public_key());
}

SigningKeys load_signing_keys(const std::string& dir) {
  const fs::path d(dir);
  if (!fs::exists(d / "roots")) throw std::runtime_error(dir + " holds no keys; run `diode keys init --keys " + dir + "`");
  SigningKeys out;
  for (uint64_t v = 1;; ++v) {
    const fs::path p = d / "roots" / (std::to_string(v) + ".json");
    if (!fs::exists(p)) break;
    out.roots.push_back(parse_untrusted_json(io::read_file(p.string(), kMaxMetadataBytes), p.string()));
  }
  if (out.roots.empty()) throw std::runtime_error(dir + "/roots holds no 1.json");
  out.root = parse_root(out.roots.back()["signed"], "roots/" + std::to_string(out.roots.size()) + ".json");
  for (const auto& [id, k] : load_dir_keys(d / "targets"))
    if (out.root.targets.keys.count(id)) out.targets.push_back(k);
  if (out.targets.size() < out.root.targets.threshold)
    throw std::runtime_error(dir + "/targets holds " + std::to_string(out.targets.size()) +
                             " current targets key(s), root version " + std::to_string(out.root.version) + " needs " +
                             std::to_string(out.root.targets.threshold));
  return out;
}

uint64_t keys_rotate(const std::string& dir, const std::string& role, bool keep_old, int root_expires_days,
                     std::time_t now) {
  if (role != "targets" && role != "root") throw std::runtime_error("--role must be targets or root");
  const fs::path d(dir);
  SigningKeys sk = load_signing_keys(dir);
  auto root_priv = load_dir_keys(d / "root");
  std::map<std::string, PrivateKey> old_root;
  for (const auto& [id, k] : root_priv)
    if (sk.root.root.keys.count(id)) old_root.emplace(id, k);
  if (old_root.size() < sk.root.root.threshold)
    throw std::runtime_error("rotation needs " + std::to_string(sk.root.root.threshold) + " current root key(s) in " +
                             dir + "/root, found " + std::to_string(old_root.size()));
  std::map<std::string, PublicKey> root_pub = sk.root.root.keys, targets_pub = sk.root.targets.keys;
  std::map<std::string, PrivateKey> new_root = old_root;
  const fs::path role_dir = d / role;
  const auto& old_role = role == "root" ? sk.root.root : sk.root.targets;
  const auto fresh_keys = fresh(std::max<uint64_t>(1, old_role.keys.size()));
  auto& target_set = role == "root" ? root_pub : targets_pub;
  if (!keep_old) {
    target_set.clear();
    if (role == "root") new_root.clear();
    // Retired private keys move aside, so nothing signs with them by accident.
    fs::create_directories(d / "revoked");
    for (const auto& [id, k] : old_role.keys)
      if (fs::exists(role_dir / (id + ".key"))) fs::rename(role_dir / (id + ".key"), d / "revoked" / (id + ".key"));
  }
  for (const auto& [id, k] : fresh_keys) {
    target_set.emplace(id, k.public_key());
    if (role == "root") new_root.emplace(id, k);
  }
  save_keys(role_dir, fresh_keys);
  const uint64_t version = sk.root.version + 1;
  const uint64_t rt = std::min<uint64_t>(sk.root.root.threshold, root_pub.size());
  const uint64_t tt = std::min<uint64_t>(sk.root.targets.threshold, targets_pub.size());
  const json s = make_root(version, now + root_expires_days * 86400LL, root_pub, rt, targets_pub, tt);
  // Signed by the old root keys (so clients can follow) and the new ones.
  std::map<std::string, PrivateKey> signers = old_root;
  for (const auto& [id, k] : new_root) signers.emplace(id, k);
  write_root(d, make_envelope(s, values(signers)), new_root.begin()->second.public_key());
  return version;
}

std::vector<KeyInfo> keys_list(const std::string& dir) {
  const SigningKeys sk = load_signing_keys(dir);
  std::vector<KeyInfo> out;
  for (const char* role : {"root", "targets", "revoked"}) {
    const fs::path rd = fs::path(dir) / role;
    if (!fs::exists(rd)) continue;
    for (const auto& e : fs::directory_iterator(rd)) {
      if (e.path().extension() != ".key") continue;
      const std::string id = e.path().stem().string();
      const std::string pub = PrivateKey::from_pem(io::read_file(e.path().string(), 64 << 10)).public_key().hex();
      out.push_back({role, id, pub, e.path().string(),
                     sk.root.root.keys.count(id) > 0 || sk.root.targets.keys.count(id) > 0});
    }
  }
  return out;
}

}  // namespace diode::bundle
