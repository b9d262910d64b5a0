// `diode dataset export|stats` and `diode contribute`: the hub's subcommands
// (registered from cli/main.cpp). They work on a store directory directly
// (read-only, safe next to a running hub) or on a hub over HTTP.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "../../cli/commands.h"
#include "contribution.h"
#include "diode/bundle/crypto.h"
#include "diode/bundle/http_fetch.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/wire.h"
#include "http_client.h"
#include "stats.h"
#include "store.h"

namespace diode::cli {

namespace {

constexpr size_t kMaxDownload = 256u << 20;

void require_hardware_key(const std::string& hw) {
  if (!is_valid_hardware_key(hw)) throw std::invalid_argument("--hardware: '" + hw + "' is not a hardware key");
}

std::string http_error(const hub::HttpResult& r) {
  try {
    auto j = nlohmann::json::parse(r.body);
    return "HTTP " + std::to_string(r.status) + " " + j.value("error", "") + ": " + j.value("message", "");
  } catch (...) {
    return "HTTP " + std::to_string(r.status);
  }
}

Dataset dataset_from_hub(const std::string& url, const std::string& hw, bool community) {
  auto r = hub::http_get(hub::join_url(url, "/v1/datasets/" + hw + "?community=" + (community ? "include" : "exclude")),
                         kMaxDownload);
  if (r.status != 200) throw std::runtime_error("export from " + url + " failed: " + http_error(r));
  // Verify every shard before writing anything: the hub is trusted less than the disk.
  Dataset d = wire::decode_dataset(gz::decompress(r.body, wire::kMaxMessageBytes));
  if (d.hardware_key != hw) throw WireError("hub answered a dataset of " + d.hardware_key + ", asked for " + hw);
  return d;
}

Dataset dataset_from_store(const std::string& dir, const std::string& hw, bool community,
                           std::vector<std::string>* sources, nlohmann::json* contributions = nullptr) {
  hub::Store::Options so;
  so.dir = dir;
  so.read_only = true;
  hub::Store store(so);
  if (!store.hardware(hw)) throw std::runtime_error("no data for hardware " + hw + " in " + dir);
  if (contributions) *contributions = store.contributions(hw);
  return store.dataset(hw, community, sources);
}

// Community shards the store or hub holds for `hw` that a fleet-only stats
// left out; 0 if unknown (an older hub).
uint64_t community_shards_of_store(const std::string& dir, const std::string& hw) {
  hub::Store::Options so;
  so.dir = dir;
  so.read_only = true;
  hub::Store store(so);
  auto row = store.hardware(hw);
  return row ? row->community_shards : 0;
}

uint64_t community_shards_of_hub(const std::string& url, const std::string& hw) {
  auto r = hub::http_get(hub::join_url(url, "/v1/hardware"), 16u << 20);
  if (r.status != 200) return 0;
  try {
    const auto j = nlohmann::json::parse(r.body);
    for (const auto& h : j.at("hardware"))
      if (h.at("key").get<std::string>() == hw) return h.at("community_shards").get<uint64_t>();
  } catch (const std::exception&) {
    // An older or odd hub: the note is left out, the stats stand.
  }
  return 0;
}

uint64_t now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace

void register_hub_commands(CLI::App& app) {
  auto* dataset = app.add_subcommand("dataset", "Export and inspect timing datasets of a hub");
  dataset->require_subcommand(1);

  // ---- diode dataset export ------------------------------------------------
  struct ExportArgs {
    std::string hw, out, out_flag, data, hub;
    bool include = false, exclude = false;
  };
  static ExportArgs ex;
  auto* exp = dataset->add_subcommand("export", "Write one hardware's dataset (a \"dataset\" message, gzip if OUT ends in .gz)");
  exp->add_option("--hardware", ex.hw, "Hardware key, e.g. nvidia-h100-80gb")->required();
  // OUT is positional, as the FILE of `stats` and `contribute`; --out is the
  // old spelling, kept hidden (empty group) and deprecated.
  // (The description names --out so that scripts grepping the help for it, such
  // as tests/python/test_k8s.py for the MPIJob templates, still find it.)
  auto* o_out = exp->add_option("OUT", ex.out, "Output file (use .msgpack.gz for gzip; --out OUT is the deprecated spelling)");
  auto* o_out_flag = exp->add_option("--out", ex.out_flag, "Deprecated: give OUT as a positional argument")->group("");
  o_out->excludes(o_out_flag);
  auto* o_data = exp->add_option("--data", ex.data, "Hub store directory (read-only access)");
  auto* o_hub = exp->add_option("--hub", ex.hub, "Hub URL, e.g. http://127.0.0.1:8080");
  o_data->excludes(o_hub);
  auto* f_inc = exp->add_flag("--include-community", ex.include, "Include community contributions");
  exp->add_flag("--exclude-community", ex.exclude, "Exclude community contributions (default)")->excludes(f_inc);
  exp->callback([] {
    if (!ex.out_flag.empty()) {
      std::cerr << "warning: --out is deprecated; give the output file as a positional argument: diode dataset export "
                   "--hardware HW OUT\n";
      ex.out = ex.out_flag;
    }
    if (ex.out.empty()) throw std::invalid_argument("give the output file: diode dataset export --hardware HW OUT");
    require_hardware_key(ex.hw);
    if (ex.data.empty() == ex.hub.empty()) throw std::invalid_argument("give exactly one of --data or --hub");
    Dataset d = ex.hub.empty() ? dataset_from_store(ex.data, ex.hw, ex.include, nullptr)
                               : dataset_from_hub(ex.hub, ex.hw, ex.include);
    save_dataset(ex.out, d);
    std::cout << "wrote " << ex.out << ": " << d.shards.size() << " shards, " << d.record_count() << " records of "
              << d.hardware_key << (ex.include ? " (community included)" : " (fleet only)") << "\n";
  });

  // ---- diode dataset stats -------------------------------------------------
  struct StatsArgs {
    std::string file, hw, data, hub;
    bool json = false, include = false;
  };
  static StatsArgs st;
  auto* stats = dataset->add_subcommand("stats", "Coverage and composition of a dataset");
  stats->add_option("file", st.file, "Dataset file or directory");
  stats->add_option("--hardware", st.hw, "Hardware key (with --data or --hub)");
  stats->add_option("--data", st.data, "Hub store directory")->excludes("file");
  stats->add_option("--hub", st.hub, "Hub URL")->excludes("file")->excludes("--data");
  stats->add_flag("--include-community", st.include, "Count community contributions too (store/hub)");
  stats->add_flag("--json", st.json, "Print the statistics as JSON (fields: docs/api.md, GET /v1/datasets/{hw}/stats)");
  stats->callback([] {
    nlohmann::json j;
    if (!st.file.empty()) {
      j = hub::dataset_stats(load_dataset(st.file));
    } else if (!st.data.empty() || !st.hub.empty()) {
      require_hardware_key(st.hw);
      if (!st.data.empty()) {
        std::vector<std::string> sources;
        nlohmann::json contributions;
        Dataset d = dataset_from_store(st.data, st.hw, st.include, &sources, &contributions);
        j = hub::dataset_stats(d, sources);
        if (st.include) j["contributions"] = contributions;
        else j["community_shards_not_counted"] = community_shards_of_store(st.data, st.hw);
      } else {
        auto r = hub::http_get(hub::join_url(st.hub, "/v1/datasets/" + st.hw + "/stats?community=" +
                                                         (st.include ? "include" : "exclude")),
                               64u << 20);
        if (r.status != 200) throw std::runtime_error("stats from " + st.hub + " failed: " + http_error(r));
        j = nlohmann::json::parse(r.body);
        if (!st.include) j["community_shards_not_counted"] = community_shards_of_hub(st.hub, st.hw);
      }
    } else {
      throw std::invalid_argument("give a FILE, or --hardware with --data DIR or --hub URL");
    }
    if (st.json) std::cout << j.dump(1) << "\n";
    else std::cout << hub::render_stats(j);
  });

  // ---- diode contributor-key -----------------------------------------------
  static std::string keyfile;
  auto* keygen = app.add_subcommand("contributor-key", "Create an Ed25519 contributor key (PKCS#8 PEM, mode 0600)");
  keygen->add_option("file", keyfile, "Where to write the private key")->required();
  keygen->callback([] {
    if (std::filesystem::exists(keyfile)) throw std::runtime_error(keyfile + " exists; not overwriting a key");
    auto key = bundle::PrivateKey::generate();
    io::write_file_atomic(keyfile, key.to_pem());
    ::chmod(keyfile.c_str(), 0600);
    std::cout << "public key " << key.public_key().hex() << "\n";
  });

  // ---- diode contribute ----------------------------------------------------
  struct ContributeArgs {
    std::string file, hub, key, token, token_file, name;
    bool quiet = false;
  };
  static ContributeArgs co;
  auto* contribute = app.add_subcommand("contribute", "Upload a dataset recorded elsewhere to a hub, signed with your Ed25519 key");
  contribute->add_option("file", co.file, "Dataset file or directory")->required();
  contribute->add_option("--hub", co.hub, "Hub URL (https://, or http:// to loopback: the token must not travel in clear)")
      ->required();
  contribute->add_option("--key", co.key, "Contributor Ed25519 private key (PKCS#8 PEM, e.g. from `diode contributor-key`)")
      ->required();
  auto* o_tok = contribute->add_option("--token", co.token, "Bearer token for the hub (or env DIODE_HUB_TOKEN)");
  contribute->add_option("--token-file", co.token_file, "File holding the bearer token")->excludes(o_tok);
  contribute->add_option("--name", co.name,
                         "Your name as recorded in the provenance, e.g. \"Jane Doe <jane@example.org>\" (default: $USER)");
  contribute->add_flag("--quiet", co.quiet, "No upload progress on stderr");
  contribute->callback([] {
    // The same rule as `diode pull`: https, or plain http only to loopback.
    const std::string hub_url = bundle::check_hub_url(co.hub);
    std::string token = co.token;
    if (!co.token_file.empty()) token = io::read_file(co.token_file, 4096);
    if (token.empty() && std::getenv("DIODE_HUB_TOKEN")) token = std::getenv("DIODE_HUB_TOKEN");
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    if (token.empty()) throw std::invalid_argument("no token: give --token, --token-file or DIODE_HUB_TOKEN");
    std::string name = co.name;
    if (name.empty()) name = std::getenv("USER") ? std::getenv("USER") : "contributor";
    // Validate locally first: a bad dataset should fail here, not at the hub.
    Dataset d = load_dataset(co.file);
    std::string body = gz::compress(wire::encode(d));
    auto headers = hub::sign_contribution(io::read_file(co.key, 64 * 1024), name, body, now_ms());
    headers["Authorization"] = "Bearer " + token;
    headers["Content-Type"] = "application/gzip";
    hub::UploadProgressPrinter printer(std::cerr);
    hub::UploadProgress progress;
    if (!co.quiet) progress = [&printer](uint64_t sent, uint64_t total) { printer(sent, total); };
    auto r = hub::http_post(hub::join_url(hub_url, "/v1/contributions"), body, headers, 1u << 20, progress);
    if (r.status != 200 && r.status != 201) throw std::runtime_error("contribution refused: " + http_error(r));
    auto j = nlohmann::json::parse(r.body);
    std::cout << "contribution " << j.value("id", "?") << " " << j.value("status", "?") << ": " << d.shards.size()
              << " shards, " << d.record_count() << " records of " << d.hardware_key << "\n";
  });
}

}  // namespace diode::cli
