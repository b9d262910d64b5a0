#include "http_server.h"

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <future>

#include "contribution.h"
#include "diode/dataset.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/wire.h"
#include "stats.h"

namespace diode::hub {

namespace {

uint64_t now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

void error(httplib::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", code}, {"message", message}}.dump() + "\n", "application/json");
}

void json(httplib::Response& res, const nlohmann::json& j, int status = 200) {
  res.status = status;
  res.set_content(j.dump(1) + "\n", "application/json");
}

// ?community=include|exclude; default exclude (training opts in to community data).
bool include_community(const httplib::Request& req) {
  if (!req.has_param("community")) return false;
  const auto v = req.get_param_value("community");
  if (v == "include") return true;
  if (v == "exclude") return false;
  throw std::invalid_argument("community must be include or exclude");
}

}  // namespace

bool valid_model_version(const std::string& v) {
  return !v.empty() && v.size() <= 20 && v.find_first_not_of("0123456789") == std::string::npos;
}

bool valid_model_file(const std::string& f) {
  if (f.empty() || f.size() > 128 || f.find("..") != std::string::npos || f[0] == '.') return false;
  for (char c : f)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

HttpServer::HttpServer(HttpOptions opts, Store& store, Committer& committer, Metrics& metrics, Metrics::Gauges gauges)
    : opts_(std::move(opts)), store_(store), committer_(committer), metrics_(metrics), gauges_(std::move(gauges)) {
  routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  svr_.set_payload_max_length(opts_.max_body_bytes);
  svr_.set_read_timeout(30, 0);
  svr_.set_write_timeout(120, 0);
  const unsigned threads = opts_.threads;
  svr_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  if (opts_.port == 0) {
    port_ = svr_.bind_to_any_port(opts_.host);
    if (port_ <= 0) throw std::runtime_error("cannot bind HTTP on " + opts_.host);
  } else {
    if (!svr_.bind_to_port(opts_.host, opts_.port))
      throw std::runtime_error("cannot bind HTTP on " + opts_.host + ":" + std::to_string(opts_.port) +
                               " (in use or not permitted)");
    port_ = opts_.port;
  }
  thread_ = std::thread([this] { svr_.listen_after_bind(); });
}

void HttpServer::stop() {
  svr_.stop();
  if (thread_.joinable()) thread_.join();
}

bool HttpServer::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (opts_.write_token.empty()) {
    error(res, 403, "writes_disabled", "this hub was started without --write-token-file");
    return false;
  }
  const std::string h = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  const std::string& want = opts_.write_token;
  // Constant-time comparison, so the token cannot be guessed byte by byte.
  bool ok = h.size() == prefix.size() + want.size() && h.compare(0, prefix.size(), prefix) == 0 &&
            CRYPTO_memcmp(h.data() + prefix.size(), want.data(), want.size()) == 0;
  if (!ok) {
    res.set_header("WWW-Authenticate", "Bearer");
    error(res, 401, "unauthorized", "missing or wrong bearer token");
  }
  return ok;
}

void HttpServer::serve_model_file(const std::string& path, httplib::Response& res) const {
  struct stat sb {};
  // lstat: never follow a symlink planted in the registry out of it.
  if (::lstat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) return error(res, 404, "not_found", "no such file");
  if (static_cast<uint64_t>(sb.st_size) > opts_.max_body_bytes) return error(res, 500, "internal", "file too large");
  const bool is_json = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  res.set_content(io::read_file(path, opts_.max_body_bytes), is_json ? "application/json" : "application/octet-stream");
}

void HttpServer::routes() {
  svr_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::invalid_argument& e) {
      error(res, 400, "bad_request", e.what());
    } catch (const std::exception& e) {
      spdlog::error("http: {}", e.what());
      error(res, 500, "internal", e.what());
    }
  });
  svr_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.http_request();
    spdlog::debug("http {} {} -> {}", req.method, req.path, res.status);
  });

  svr_.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    auto t = store_.totals();
    json(res, {{"status", "ok"}, {"shards", t.shards}, {"records", t.records}});
  });

  svr_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(gauges_), "text/plain; version=0.0.4");
  });

  svr_.Get("/v1/hardware", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& h : store_.hardware())
      out.push_back({{"key", h.key},
                     {"hardware", nlohmann::json::parse(h.hardware_json)},
                     {"first_seen_ms", h.first_seen_ms},
                     {"shards", h.shards},
                     {"records", h.records},
                     {"community_shards", h.community_shards},
                     {"community_records", h.community_records}});
    json(res, {{"hardware", out}});
  });

  svr_.Get(R"(/v1/datasets/([^/]+)/stats)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (!store_.hardware(hw)) return error(res, 404, "not_found", "no data for hardware " + hw);
    std::vector<std::string> sources;
    const bool community = include_community(req);
    Dataset d = store_.dataset(hw, community, &sources);
    auto j = dataset_stats(d, sources);
    if (community) j["contributions"] = store_.contributions(hw);
    json(res, j);
  });

  svr_.Get(R"(/v1/datasets/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (!store_.hardware(hw)) return error(res, 404, "not_found", "no data for hardware " + hw);
    Dataset d = store_.dataset(hw, include_community(req));
    res.set_header("X-Diode-Shards", std::to_string(d.shards.size()));
    res.set_header("X-Diode-Records", std::to_string(d.record_count()));
    res.set_content(gz::compress(wire::encode(d)), "application/gzip");
  });

  svr_.Post("/v1/contributions", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    contribute(req, res);
  });

  svr_.Get(R"(/v1/models/([^/]+)/index)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    serve_model_file(store_.dir() + "/models/" + hw + "/index.json", res);
  });

  svr_.Get(R"(/v1/models/([^/]+)/([^/]+)/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string hw = req.matches[1], version = req.matches[2], file = req.matches[3];
    if (!is_valid_hardware_key(hw)) return error(res, 400, "bad_request", "not a valid hardware key");
    if (!valid_model_version(version)) return error(res, 400, "bad_request", "version must be digits");
    if (!valid_model_file(file)) return error(res, 400, "bad_request", "file must be [A-Za-z0-9._-], no '..'");
    serve_model_file(store_.dir() + "/models/" + hw + "/" + version + "/" + file, res);
  });
}

void HttpServer::contribute(const httplib::Request& req, httplib::Response& res) {
  std::map<std::string, std::string> headers;
  for (const char* h : {kHdrKey, kHdrName, kHdrTime, kHdrSignature})
    if (req.has_header(h)) headers[h] = req.get_header_value(h);
  VerifiedContribution v;
  try {
    v = verify_contribution(headers, req.body, now_ms(), opts_.rules);
  } catch (const Rejection& r) {
    metrics_.reject(r.code);
    const int status = (r.code == "invalid_shard" || r.code == "unknown_hardware") ? 422 : 400;
    return error(res, status, r.code, r.what());
  }
  if (auto known = store_.contribution(v.info.id)) {
    json(res, {{"id", v.info.id}, {"status", "duplicate"}, {"hardware_key", known->hardware_key}});
    return;
  }
  auto job = std::make_unique<Store::Job>();
  job->shards = std::move(v.shards);
  job->contribution = v.info;
  std::promise<nlohmann::json> done;
  auto fut = done.get_future();
  committer_.submit(std::move(job), [&done, this](Store::Job& j, bool ok, const std::string& err) {
    nlohmann::json out;
    if (!ok) {
      out = {{"status_code", 503}, {"error", "unavailable"}, {"message", "storage failure, retry: " + err}};
    } else if (j.contribution_rejected) {
      std::string why;
      for (size_t i = 0; i < j.results.size(); ++i)
        if (j.results[i] == PutResult::conflict || j.results[i] == PutResult::unknown_hardware) {
          why = "shard " + j.shards[i].id + ": " + to_string(j.results[i]);
          break;
        }
      out = {{"status_code", 409}, {"error", "conflict"}, {"message", why}};
    } else {
      uint64_t stored = 0, dup = 0;
      for (size_t i = 0; i < j.results.size(); ++i) {
        if (j.results[i] == PutResult::stored) {
          stored++;
          metrics_.stored(j.shards[i].records, j.shards[i].bytes.size(), true);
        } else {
          dup++;
        }
      }
      out = {{"status_code", 201}, {"stored", stored}, {"duplicate", dup}};
    }
    done.set_value(std::move(out));
  });
  nlohmann::json out = fut.get();
  int status = out["status_code"];
  out.erase("status_code");
  if (status != 201) {
    metrics_.reject(out["error"]);
    return error(res, status, out["error"], out["message"]);
  }
  spdlog::info("contribution {} from {} ({}): {} shards stored, {} already known", v.info.id,
               v.info.contributor_name, v.info.contributor_key, out["stored"].get<uint64_t>(),
               out["duplicate"].get<uint64_t>());
  json(res,
       {{"id", v.info.id},
        {"status", "stored"},
        {"hardware_key", v.info.hardware_key},
        {"contributor", {{"name", v.info.contributor_name}, {"public_key", v.info.contributor_key}}},
        {"shards", out["stored"].get<uint64_t>() + out["duplicate"].get<uint64_t>()},
        {"stored", out["stored"]},
        {"duplicate", out["duplicate"]},
        {"records", v.records}},
       201);
}

}  // namespace diode::hub
