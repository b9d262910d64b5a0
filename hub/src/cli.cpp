// `diode dataset export|stats` and `diode contribute`: the hub's subcommands
// (registered from cli/main.cpp). They work on a store directory directly
// (read-only, safe next to a running hub) or on a hub over HTTP.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "../../cli/commands.h"
#include "contribution.h"
#include "diode/bundle/crypto.h"
#include "diode/bundle/http_fetch.h"
#include "diode/clock.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/wire.h"
#include "fsck.h"
#include "http_client.h"
#include "stats.h"
#include "validate.h"
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

constexpr const char* kReadTokenEnv = "DIODE_HUB_READ_TOKEN";

// The hub's read token for `diode dataset export|stats --hub` (a hub started
// with --read-token-file answers exports only with it): the file's content
// (--read-token-file), else $DIODE_HUB_READ_TOKEN; trailing whitespace dropped;
// empty: no token. A token must be printable ASCII without spaces (it travels
// in an HTTP header); the error names where it came from.
std::string read_token_from(const std::string& file) {
  std::string token, origin;
  if (!file.empty()) {
    token = io::read_file(file, 4096);
    origin = "--read-token-file " + file;
  } else if (const char* env = std::getenv(kReadTokenEnv)) {
    token = env;
    origin = kReadTokenEnv;
  }
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (!file.empty() && token.empty()) throw std::invalid_argument(origin + ": the file is empty");
  for (unsigned char c : token)
    if (c < 0x21 || c > 0x7e)
      throw std::invalid_argument(origin + ": the read token must be printable ASCII without spaces");
  return token;
}

// The request headers that carry `token` to `hub_url`; the same rule as
// `diode pull` and `diode contribute`: https, or plain http only to loopback,
// so that the token never travels in clear.
std::map<std::string, std::string> read_headers(const std::string& hub_url, const std::string& token) {
  if (token.empty()) return {};
  bundle::check_hub_url(hub_url);
  return {{"Authorization", "Bearer " + token}};
}

// "HTTP 401 ...", with what to do when the hub wants its read token.
std::string read_error(const hub::HttpResult& r, bool sent_token) {
  std::string why = http_error(r);
  if (r.status == 401)
    why += sent_token ? " (the hub refused this read token)"
                      : std::string(" (the hub needs its read token: give --read-token-file FILE or set ") +
                            kReadTokenEnv + ")";
  return why;
}

Dataset dataset_from_hub(const std::string& url, const std::string& hw, bool community, const std::string& token) {
  auto r = hub::http_get(hub::join_url(url, "/v1/datasets/" + hw + "?community=" + (community ? "include" : "exclude")),
                         kMaxDownload, read_headers(url, token));
  if (r.status != 200) throw std::runtime_error("export from " + url + " failed: " + read_error(r, !token.empty()));
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

// The community part of a hub's data for one hardware: shards, records and the
// contributors credited for them (contribution.h, GET /v1/contributors).
nlohmann::json community_of_store(const std::string& dir, const std::string& hw) {
  hub::Store::Options so;
  so.dir = dir;
  so.read_only = true;
  hub::Store store(so);
  return hub::contributors_summary(store, hw);
}

std::optional<nlohmann::json> community_of_hub(const std::string& url, const std::string& hw) {
  auto r = hub::http_get(hub::join_url(url, "/v1/contributors?hardware=" + hw), 16u << 20);
  if (r.status != 200) return std::nullopt;  // an older hub: no list
  try {
    auto j = nlohmann::json::parse(r.body);
    if (j.is_object() && j.contains("contributors") && j["contributors"].is_array()) return j;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// Why the hub refused a contribution, in one line that names the file(s): the
// hub names a shard by its index ("dataset.shards[12]: ...", the order of the
// body, which is the order of `origins`) or by its id ("shard ID: conflict").
std::string explain_refusal(const hub::HttpResult& r, const std::string& path, const Dataset& d,
                            const std::vector<std::string>& origins) {
  std::string code, message;
  try {
    auto j = nlohmann::json::parse(r.body);
    code = j.value("error", "");
    message = j.value("message", "");
  } catch (...) {
  }
  for (auto& c : message)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';  // one line, nothing that drives a terminal
  if (message.size() > 400) message = message.substr(0, 400) + "...";
  const std::string head =
      "contribution refused by the hub (HTTP " + std::to_string(r.status) + (code.empty() ? "" : " " + code) + "): ";
  static const std::string kIndex = "dataset.shards[";
  if (message.starts_with(kIndex)) {
    const auto close = message.find("]: ");
    const std::string digits = message.substr(kIndex.size(), close == std::string::npos ? 0 : close - kIndex.size());
    if (!digits.empty() && digits.size() < 10 && digits.find_first_not_of("0123456789") == std::string::npos) {
      const size_t i = std::stoul(digits);
      if (i < origins.size()) return head + origins[i] + ": shard " + d.shards[i].id + ": " + message.substr(close + 3);
    }
  } else if (message.starts_with("shard ")) {
    // "shard <catalog id>: <result>"; a catalog id is "<wire id>" or "<wire id>@<sha256 hex>".
    const auto colon = message.rfind(": ");
    std::string id = message.substr(6, colon == std::string::npos ? std::string::npos : colon - 6);
    const std::string result = colon == std::string::npos ? "" : message.substr(colon + 2);
    if (auto at = id.find('@'); at != std::string::npos) id.resize(at);
    std::vector<std::string> files;
    for (size_t i = 0; i < d.shards.size(); ++i)
      if (d.shards[i].id == id && std::find(files.begin(), files.end(), origins[i]) == files.end())
        files.push_back(origins[i]);
    if (!files.empty()) {
      std::string why = result;
      if (result == "conflict") {
        why = "the hub already holds different content under this shard id";
        if (files.size() > 1) {
          why += " (an older hub keys community shards by id alone, and " + std::to_string(files.size()) +
                 " files hold this id: " + files[0] + ", " + files[1] + (files.size() > 2 ? ", ..." : "") + ")";
        }
      } else if (result == "unknown_hardware") {
        why = "the hub does not accept shards of this hardware (not in its manifests)";
      }
      return head + files[0] + ": shard " + id + ": " + why;
    }
  }
  // A refusal of the whole upload (token, name, size): it names what was given.
  return head + path + ": " + (message.empty() ? "no reason given" : message);
}

}  // namespace

void register_hub_commands(CLI::App& app) {
  auto* dataset = app.add_subcommand("dataset", "Export and inspect timing datasets of a hub");
  dataset->require_subcommand(1);

  // ---- diode dataset export ------------------------------------------------
  struct ExportArgs {
    std::string hw, out, out_flag, data, hub, read_token_file;
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
  exp->add_option("--read-token-file", ex.read_token_file,
                  std::string("With --hub: file holding the hub's read token (default $") + kReadTokenEnv + ")")
      ->excludes(o_data);
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
                               : dataset_from_hub(ex.hub, ex.hw, ex.include, read_token_from(ex.read_token_file));
    save_dataset(ex.out, d);
    std::cout << "wrote " << ex.out << ": " << d.shards.size() << " shards, " << d.record_count() << " records of "
              << d.hardware_key << (ex.include ? " (community included)" : " (fleet only)") << "\n";
  });

  // ---- diode dataset stats -------------------------------------------------
  struct StatsArgs {
    std::string file, hw, data, hub, read_token_file;
    bool json = false, include = false;
  };
  static StatsArgs st;
  auto* stats = dataset->add_subcommand("stats", "Coverage and composition of a dataset");
  stats->add_option("file", st.file, "Dataset file or directory");
  stats->add_option("--hardware", st.hw, "Hardware key (with --data or --hub)");
  stats->add_option("--data", st.data, "Hub store directory")->excludes("file");
  stats->add_option("--hub", st.hub, "Hub URL")->excludes("file")->excludes("--data");
  stats->add_option("--read-token-file", st.read_token_file,
                    std::string("With --hub: file holding the hub's read token (default $") + kReadTokenEnv + ")")
      ->needs("--hub");
  stats->add_flag("--include-community", st.include,
                  "Count community contributions in the figures too (store/hub); without it they are shown apart, "
                  "with the list of contributors (GET /v1/contributors)");
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
        j["community"] = community_of_store(st.data, st.hw);
      } else {
        const std::string token = read_token_from(st.read_token_file);
        auto r = hub::http_get(hub::join_url(st.hub, "/v1/datasets/" + st.hw + "/stats?community=" +
                                                         (st.include ? "include" : "exclude")),
                               64u << 20, read_headers(st.hub, token));
        if (r.status != 200)
          throw std::runtime_error("stats from " + st.hub + " failed: " + read_error(r, !token.empty()));
        j = nlohmann::json::parse(r.body);
        if (!st.include) j["community_shards_not_counted"] = community_shards_of_hub(st.hub, st.hw);
        if (auto c = community_of_hub(st.hub, st.hw)) j["community"] = *c;
      }
    } else {
      throw std::invalid_argument("give a FILE, or --hardware with --data DIR or --hub URL");
    }
    if (st.json) std::cout << j.dump(1) << "\n";
    else std::cout << hub::render_stats(j);
  });

  // ---- diode hub fsck (fsck.h) ---------------------------------------------
  static std::string fsck_dir;
  static bool fsck_repair = false;
  auto* hubcmd = app.add_subcommand("hub", "Maintenance of a hub store");
  hubcmd->require_subcommand(1);
  auto* fsck = hubcmd->add_subcommand("fsck", "Verify every shard of a store; --repair quarantines corrupt ones");
  fsck->add_option("--data", fsck_dir, "Hub store directory")->required();
  fsck->add_flag("--repair", fsck_repair, "Quarantine corrupt shards (bytes and catalog rows); stop the hub first");
  fsck->callback([] {
    const int rc = hub::fsck(fsck_dir, fsck_repair, std::cout);
    std::cout.flush();
    if (rc != 0) std::exit(rc);
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
  contribute->footer(
      "Every shard is checked here first, with the hub's own rules; a refusal (here or from the hub) names the file "
      "and the reason in one line. The hub stores each shard once, by content: a shard it already holds is not "
      "credited again.\n"
      "Exit status: 0 new data stored and credited to you; 3 nothing new credited (the hub already holds every "
      "shard); 1 refused or failed (local check, hub, network); 2 a file is not a valid diode shard or dataset.");
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
    // Validate locally first, with the hub's checks: a bad shard fails here,
    // before any byte is sent, naming its file.
    std::vector<std::string> origins;
    Dataset d = load_dataset(co.file, &origins);
    if (d.shards.empty()) throw std::runtime_error("contribution refused before upload: " + co.file + ": no shards");
    const uint64_t now = diode::wall_now_ms();
    for (size_t i = 0; i < d.shards.size(); ++i) {
      try {
        hub::admit_decoded(d.shards[i], wire::encode(d.shards[i]), hub::Source::community, now);
      } catch (const hub::Rejection& e) {
        throw std::runtime_error("contribution refused before upload: " + origins[i] + ": shard " + d.shards[i].id +
                                 ": " + e.what());
      }
    }
    std::string body = gz::compress(wire::encode(d));
    auto headers = hub::sign_contribution(io::read_file(co.key, 64 * 1024), name, body, now);
    headers["Authorization"] = "Bearer " + token;
    headers["Content-Type"] = "application/gzip";
    hub::UploadProgressPrinter printer(std::cerr);
    hub::UploadProgress progress;
    if (!co.quiet) progress = [&printer](uint64_t sent, uint64_t total) { printer(sent, total); };
    auto r = hub::http_post(hub::join_url(hub_url, "/v1/contributions"), body, headers, 1u << 20, progress);
    if (r.status != 200 && r.status != 201) throw std::runtime_error(explain_refusal(r, co.file, d, origins));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(r.body);
    } catch (const std::exception&) {
      throw std::runtime_error("the hub answered HTTP " + std::to_string(r.status) + " with a body that is not JSON");
    }
    auto count = [&](const char* k, uint64_t dflt) {
      return j.contains(k) && j[k].is_number_unsigned() ? j[k].get<uint64_t>() : dflt;
    };
    // The contribution id is the hex SHA-256 of the body: print nothing else a hub might put there.
    std::string id = j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>() : "";
    if (id.size() != 64 || id.find_first_not_of("0123456789abcdef") != std::string::npos) id = "?";
    if (r.status == 200) {
      // "duplicate": either this exact upload was stored before, or every shard in it was.
      std::cout << "contribution " << id << " duplicate: nothing new credited: all " << count("shards", d.shards.size())
                << " shards (" << d.record_count() << " records of " << d.hardware_key
                << ") are already stored on the hub\n";
      std::cout.flush();
      throw CLI::RuntimeError(3);
    }
    const uint64_t stored = count("stored", d.shards.size()), dup = count("duplicate", 0);
    std::cout << "contribution " << id << " stored: " << stored << " new shards credited to " << name << "; " << dup
              << " already on the hub; " << d.shards.size() << " shards, " << d.record_count() << " records of "
              << d.hardware_key << "\n";
  });
}

}  // namespace diode::cli
