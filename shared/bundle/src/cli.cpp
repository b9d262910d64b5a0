// `diode` subcommands for signed model bundles (registered from cli/main.cpp):
// keys init|rotate|list, publish, pull, verify, models list|example.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>

#include "../../../cli/commands.h"
#include "diode/bundle/bundle.h"
#include "diode/bundle/client.h"
#include "diode/bundle/http_fetch.h"
#include "diode/bundle/keystore.h"
#include "diode/bundle/model_dir.h"
#include "diode/bundle/registry.h"
#include "diode/hardware.h"
#include "diode/io.h"

namespace diode::cli {

namespace {
using namespace diode::bundle;

// The release root key shipped in the Python package (python/torch_diode/bundles/root.pub,
// python/release/release_bundles.sh): the default trust anchor, as in the Python hook.
#ifndef DIODE_SHIPPED_ROOT_KEY
#define DIODE_SHIPPED_ROOT_KEY ""
#endif

// --root-key: 64 hex characters, or a file holding them (e.g. keys/root.pub). Without it,
// $DIODE_ROOT_PUBKEY, then the shipped release root key -- the same order as torch_diode's
// hook and its `diode` command (torch_diode/hook/sources.py root_key()).
PublicKey load_root_key(const std::string& arg) {
  std::string v = arg, from = "--root-key";
  if (v.empty()) {
    if (const char* e = std::getenv("DIODE_ROOT_PUBKEY"); e && *e) v = e, from = "DIODE_ROOT_PUBKEY";
  }
  if (v.empty()) {
    const std::string shipped = DIODE_SHIPPED_ROOT_KEY;
    if (shipped.empty() || !std::filesystem::is_regular_file(shipped))
      throw std::invalid_argument("no root key: pass --root-key HEX|FILE or set DIODE_ROOT_PUBKEY (the release root key " +
                                  (shipped.empty() ? std::string("python/torch_diode/bundles/root.pub") : shipped) +
                                  " is not there)");
    v = shipped, from = "the release root key";
  }
  if (v.size() != 64 || v.find_first_not_of("0123456789abcdef") != std::string::npos) {
    if (!std::filesystem::is_regular_file(v))
      throw std::invalid_argument(from + ": " + v + " is neither 64 hex characters nor a file");
    const std::string file = v;
    v = io::read_file(file, 4096);
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ' || v.back() == '\r')) v.pop_back();
    try {
      return PublicKey::from_hex(v);
    } catch (const VerifyError& e) {
      throw std::invalid_argument(from + ": " + file + ": " + e.what());
    }
  }
  return PublicKey::from_hex(v);
}

// The local GPU's hardware key from nvidia-smi (first GPU).
std::string detect_hardware_key() {
  std::unique_ptr<FILE, int (*)(FILE*)> p(
      ::popen("nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>/dev/null", "r"), &::pclose);
  std::string out;
  if (p) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p.get()) && out.size() < 4096) out += buf;
  }
  const auto nl = out.find('\n');
  const std::string line = out.substr(0, nl);
  const auto comma = line.rfind(',');
  if (line.empty() || comma == std::string::npos)
    throw std::runtime_error("--hardware auto: no NVIDIA GPU found (nvidia-smi is missing or lists no GPU); pass --hardware KEY");
  HardwareId h;
  h.vendor = "nvidia";
  h.device_name = line.substr(0, comma);
  try {
    h.memory_bytes = std::stoull(line.substr(comma + 1)) * 1024ull * 1024ull;
  } catch (const std::exception&) {
    throw std::runtime_error("--hardware auto: cannot parse nvidia-smi output \"" + line + "\"");
  }
  return hardware_key(h);
}
}  // namespace

void register_bundle_commands(CLI::App& app) {
  auto keys_dir = std::make_shared<std::string>();
  auto* keys = app.add_subcommand("keys", "Manage bundle signing keys (root and online targets keys)");
  keys->add_option("--keys", *keys_dir, "Key directory (default ~/.config/diode/keys)");
  keys->require_subcommand(1);
  keys->fallthrough();  // `diode keys init --keys DIR` works as well as `diode keys --keys DIR init`
  auto kopt = std::make_shared<KeyInitOptions>();
  auto* init = keys->add_subcommand("init", "Create root and targets keys and root version 1");
  init->add_option("--root-keys", kopt->root_keys, "Number of root keys")->capture_default_str();
  init->add_option("--root-threshold", kopt->root_threshold, "Root signatures required")->capture_default_str();
  init->add_option("--targets-keys", kopt->targets_keys, "Number of online signing keys")->capture_default_str();
  init->add_option("--targets-threshold", kopt->targets_threshold, "Targets signatures required")->capture_default_str();
  init->add_option("--expires-days", kopt->root_expires_days, "Root metadata lifetime")->capture_default_str();
  init->callback([keys_dir, kopt] {
    const std::string dir = keys_dir->empty() ? default_keys_dir() : *keys_dir;
    keys_init(dir, *kopt, std::time(nullptr));
    std::cout << "created keys in " << dir << "\nroot public key (pin it in clients): "
              << io::read_file(dir + "/root.pub") << "move " << dir << "/root/ offline once you have published\n";
  });
  auto role = std::make_shared<std::string>("targets");
  auto keep_old = std::make_shared<bool>(false);
  auto rot_days = std::make_shared<int>(365);
  auto* rotate = keys->add_subcommand("rotate", "Replace the keys of a role; signs a new root version");
  rotate->add_option("--role", *role, "targets or root")->capture_default_str();
  rotate->add_flag("--keep-old", *keep_old, "Keep the old keys valid (staged rollover)");
  rotate->add_option("--expires-days", *rot_days, "Root metadata lifetime")->capture_default_str();
  rotate->callback([keys_dir, role, keep_old, rot_days] {
    const std::string dir = keys_dir->empty() ? default_keys_dir() : *keys_dir;
    const uint64_t v = keys_rotate(dir, *role, *keep_old, *rot_days, std::time(nullptr));
    std::cout << "rotated " << *role << " keys; root version " << v << " written to " << dir << "/roots/\n";
  });
  keys->add_subcommand("list", "List keys and whether the current root lists them")->callback([keys_dir] {
    const std::string dir = keys_dir->empty() ? default_keys_dir() : *keys_dir;
    for (const auto& k : keys_list(dir))
      std::cout << k.role << "\t" << k.public_hex << "\t" << (k.in_current_root ? "current" : "retired") << "\t" << k.path << "\n";
  });

  struct PublishArgs {
    std::string model, registry, keys;
    int days = 180;
    std::vector<std::string> torch;
  };
  auto pa = std::make_shared<PublishArgs>();
  auto* pub = app.add_subcommand("publish", "Sign a model directory as the next bundle version in a registry");
  pub->add_option("--model", pa->model, "Model directory (model.json, weights.msgpack)")->required();
  pub->add_option("--registry", pa->registry, "Registry root (default $DIODE_REGISTRY or ~/.local/share/diode/registry)");
  pub->add_option("--keys", pa->keys, "Key directory (default ~/.config/diode/keys)");
  pub->add_option("--expires-days", pa->days, "Bundle lifetime in days (1.." + std::to_string(kMaxExpiresDays) + ")")
      ->capture_default_str();
  pub->add_option("--tested-torch", pa->torch, "Torch versions the model was tested with");
  pub->callback([pa] {
    PublishOptions o;
    o.expires_days = pa->days;
    o.tested_torch_versions = pa->torch;
    const auto r = publish(pa->registry.empty() ? default_registry_dir() : pa->registry, pa->model,
                           load_signing_keys(pa->keys.empty() ? default_keys_dir() : pa->keys), o);
    std::cout << "published " << r.hardware_key << (r.family == kGemmFamily ? "" : " family " + r.family) << " version "
              << r.version << " at " << r.dir << "\n";
  });

  struct PullArgs {
    std::string hardware = "auto", hub, cache, root_key, family = kGemmFamily;
    bool offline = false;
  };
  auto pl = std::make_shared<PullArgs>();
  auto* pull_cmd = app.add_subcommand("pull", "Fetch and verify the current bundle for a GPU into the cache");
  // The same environment as the Python hook (torch_diode): flags win over it.
  pull_cmd->add_option("--hardware", pl->hardware, "Hardware key, or auto (nvidia-smi)")
      ->envname("DIODE_HARDWARE_KEY")
      ->capture_default_str();
  pull_cmd->add_option("--hub", pl->hub, "Hub URL (https://, or http:// to loopback)")->envname("DIODE_HUB_URL");
  pull_cmd->add_option("--cache", pl->cache, "Cache directory (default $DIODE_CACHE_DIR, $XDG_CACHE_HOME/diode or ~/.cache/diode)");
  pull_cmd->add_option("--root-key", pl->root_key,
                       "Pinned root public key: hex or a file (default $DIODE_ROOT_PUBKEY, else the release root key "
                       "shipped in python/torch_diode/bundles/root.pub)");
  pull_cmd->add_flag("--offline", pl->offline, "Use the cache only");
  pull_cmd->add_option("--family", pl->family,
                       "Decision family of the model: gemm, or another family's bundle from "
                       "/v1/models/<hw>/families/<family>/ (cached under <cache>/<hw>/families/<family>/)")
      ->capture_default_str();
  pull_cmd->callback([pl] {
    PullOptions o;
    check_family(pl->family);  // before anything else: a typo is a usage error
    o.family = pl->family;
    o.hardware_key = pl->hardware == "auto" || pl->hardware.empty() ? detect_hardware_key() : pl->hardware;
    o.hub_url = pl->offline ? "" : pl->hub;
    if (o.hub_url.empty() && !pl->offline) throw std::invalid_argument("pass --hub URL (or set DIODE_HUB_URL), or --offline");
    o.cache_dir = pl->cache;
    o.root_key = load_root_key(pl->root_key);
    PullResult r;
    try {
      r = pull(o);
    } catch (const HttpError& e) {
      if (e.status() != 404) throw;
      // Unknown hardware key: say what the hub does have.
      std::string listing;
      try {
        const auto models = list_hub_models(o.hub_url);
        if (models.empty()) listing = "the hub serves no models yet";
        else listing = "the hub serves models for:";
        for (const auto& m : models)
          listing += "\n  " + m.hardware_key + "\tversion " + std::to_string(m.version) + "\tpublished " + m.published_at;
      } catch (const std::exception& le) {
        listing = std::string("(could not list the hub's models: ") + le.what() + ")";
      }
      throw std::runtime_error("no " + (o.family == kGemmFamily ? std::string() : o.family + " ") + "model for " +
                               o.hardware_key + " on " + o.hub_url + " (" + e.what() + ")\n" + listing);
    }
    if (r.offline) std::cerr << "warning: served from the cache: " << r.note << "\n";
    std::cout << r.path << "\n";
  });

  auto vroot = std::make_shared<std::string>();
  auto vdir = std::make_shared<std::string>();
  auto vfamily = std::make_shared<std::string>();
  auto* ver = app.add_subcommand("verify", "Verify a bundle directory (signatures, root chain, hashes, expiry)");
  ver->add_option("BUNDLE_DIR", *vdir, "Bundle directory")->required();
  ver->add_option("--root-key", *vroot,
                  "Pinned root public key: hex or a file (default $DIODE_ROOT_PUBKEY, else the release root key "
                  "shipped in python/torch_diode/bundles/root.pub)");
  ver->add_option("--family", *vfamily, "Also require this decision family (default: any; absent in bundle.json = gemm)");
  ver->callback([vdir, vroot, vfamily] {
    if (!vfamily->empty()) check_family(*vfamily);
    const PublicKey root = load_root_key(*vroot);
    BundleMeta m;
    try {
      m = verify_bundle_dir(*vdir, root, std::time(nullptr), *vfamily);
    } catch (const VerifyError& e) {
      throw VerifyError(*vdir + ": " + e.what());  // which bundle, when a script verifies several
    }
    std::cout << "OK " << m.hardware_key << (m.family == kGemmFamily ? "" : " family " + m.family) << " version " << m.version << " expires " << format_time(m.expires)
              << " root key " << root.fingerprint() << "\n";
  });

  auto* models = app.add_subcommand("models", "Bundles in a registry or the local cache");
  models->require_subcommand(1);
  auto lreg = std::make_shared<std::string>();
  auto lcache = std::make_shared<std::string>();
  auto* list = models->add_subcommand(
      "list",
      "List models. With --registry DIR (or $DIODE_REGISTRY): a publisher's registry (hardware key, current version, "
      "index expiry, every version). With --cache DIR, or when no registry is given: the local pull cache (hardware "
      "key, version, when a pull last verified it, path; default $DIODE_CACHE_DIR, $XDG_CACHE_HOME/diode or "
      "~/.cache/diode). A GEMM model's line starts with its hardware key and version; another decision family's "
      "has a family column after the hardware key (\"<hw>\tfamily <family>\tversion ...\")");
  auto* o_reg = list->add_option("--registry", *lreg, "Registry root to list (default $DIODE_REGISTRY)");
  list->add_option("--cache", *lcache, "Pull cache to list")->excludes(o_reg);
  list->callback([lreg, lcache] {
    std::string registry = *lreg;
    if (registry.empty() && lcache->empty())
      if (const char* r = std::getenv("DIODE_REGISTRY"); r && *r) registry = r;
    if (registry.empty()) {
      const std::string dir = lcache->empty() ? default_cache_dir() : *lcache;
      const auto entries = list_cache(dir);
      if (entries.empty()) std::cerr << "no models cached in " << dir << "\n";
      for (const auto& m : entries)
        std::cout << m.hardware_key << (m.family == kGemmFamily ? "" : "\tfamily " + m.family) << "\tversion " << m.version << "\tverified " << m.verified_at << "\t" << m.path
                  << "\n";
      return;
    }
    for (const auto& e : list_registry(registry, false, SIZE_MAX, /*with_families=*/true)) {
      std::cout << e.hardware_key << (e.family == kGemmFamily ? "" : "\tfamily " + e.family) << "\tcurrent " << e.current << "\texpires " << e.expires << "\tversions";
      for (auto v : e.versions) std::cout << " " << v;
      std::cout << "\n";
    }
  });
  struct ExampleArgs {
    std::string out, hw = "nvidia-h100-80gb", family = kGemmFamily;
    uint64_t hidden = 8, blocks = 1;
  };
  auto ex = std::make_shared<ExampleArgs>();
  auto* example = models->add_subcommand("example", "Write the tiny deterministic example model directory");
  example->add_option("--out", ex->out, "Output directory")->required();
  example->add_option("--hardware", ex->hw, "Hardware key")->capture_default_str();
  example->add_option("--hidden", ex->hidden, "Hidden units")->capture_default_str();
  example->add_option("--blocks", ex->blocks, "Residual blocks")->capture_default_str();
  example->add_option("--family", ex->family, "Decision family of the model (gemm, scaled_mm)")->capture_default_str();
  example->callback([ex] {
    if (!is_valid_hardware_key(ex->hw)) throw std::invalid_argument("not a valid hardware key: " + ex->hw);
    check_family(ex->family);
    write_example_model(ex->out, ex->hw, ex->hidden, ex->blocks, ex->family);
    std::cout << "wrote " << ex->out << "/model.json and weights.msgpack\n";
  });
}

}  // namespace diode::cli
