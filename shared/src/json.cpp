#include "diode/json.h"

#include <cmath>
#include <set>

#include "diode/error.h"
#include "diode/sha256.h"
#include "diode/wire.h"

namespace diode {

using nlohmann::json;

namespace {

// Strict reader over one JSON object: every key must be read exactly once.
class Obj {
 public:
  Obj(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j.is_object()) throw WireError(path_ + ": expected object");
  }
  const json& at(const char* key) {
    auto it = j_.find(key);
    if (it == j_.end()) throw WireError(path_ + "." + key + ": missing");
    seen_.insert(key);
    return *it;
  }
  bool has(const char* key) const { return j_.contains(key); }
  std::string str(const char* key) {
    const json& v = at(key);
    if (!v.is_string()) throw WireError(path_ + "." + key + ": expected string");
    return v.get<std::string>();
  }
  uint64_t uint(const char* key) {
    const json& v = at(key);
    if (!v.is_number_unsigned()) throw WireError(path_ + "." + key + ": expected unsigned integer");
    return v.get<uint64_t>();
  }
  bool boolean(const char* key) {
    const json& v = at(key);
    if (!v.is_boolean()) throw WireError(path_ + "." + key + ": expected bool");
    return v.get<bool>();
  }
  double number(const char* key) {
    const json& v = at(key);
    if (!v.is_number()) throw WireError(path_ + "." + key + ": expected number");
    return v.get<double>();
  }
  std::string path(const char* key) const { return path_ + "." + key; }
  void done() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!seen_.count(it.key())) throw WireError(path_ + "." + it.key() + ": unknown field");
  }

 private:
  const json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace

// Sets one key of a struct's JSON form (types.h's visit()).
struct ToJsonField {
  json& j;
  template <class T>
  void operator()(const char* name, const T& x) const {
    if constexpr (std::is_same_v<T, std::map<std::string, int64_t>>) {
      json extra = json::object();
      for (const auto& [k, v] : x) extra[k] = v;
      j[name] = std::move(extra);
    } else if constexpr (std::is_same_v<T, TimingStatus>) {
      j[name] = to_string(x);
    } else if constexpr (std::is_same_v<T, Problem> || std::is_same_v<T, KernelConfig>) {
      j[name] = to_json(x);
    } else {
      j[name] = x;
    }
  }
};

template <class T>
json fields_json(const T& x) {
  json j = json::object();
  visit(x, ToJsonField{j});
  return j;
}

json to_json(const HardwareId& h) { return fields_json(h); }
// "scale" only when it is not "none", so a GEMM problem's JSON form is the one it
// had before scale existed.
json to_json(const Problem& p) {
  json j = fields_json(p);
  if (p.scale == "none") j.erase("scale");
  return j;
}
json to_json(const KernelConfig& c) { return fields_json(c); }
json to_json(const TimingRecord& r) { return fields_json(r); }

json to_json(const Producer& p) { return fields_json(p); }

json to_json(const Shard& s) {
  json problems = json::array();
  for (const auto& p : s.problems) problems.push_back(to_json(p));
  json records = json::array();
  for (const auto& r : s.records) records.push_back(fields_json(r));
  json j = {{"wire_version", s.wire_version}, {"id", s.id}, {"sweep_id", s.sweep_id},
          {"hardware", to_json(s.hardware)}, {"producer", to_json(s.producer)}, {"created_ms", s.created_ms},
          {"problems", problems}, {"records", records},
          {"method", {{"timing", s.method.timing}, {"collector", s.method.collector}}},
          {"problem_wall_s", s.problem_wall_s}, {"sha256", to_hex(s.sha256)}};
  if (!s.templates.empty()) {  // wire version 3 only; absent when empty
    json templates = json::array();
    for (const auto& t : s.templates) templates.push_back(fields_json(t));
    j["templates"] = std::move(templates);
  }
  return j;
}

static Problem problem_at(const json& j, const std::string& path);
static KernelConfig config_at(const json& j, const std::string& path);

// Reads one key of a struct's JSON form (types.h's visit()), strictly.
struct FromJsonField {
  Obj& o;
  void operator()(const char* name, std::string& x) const { x = o.str(name); }
  void operator()(const char* name, uint64_t& x) const { x = o.uint(name); }
  void operator()(const char* name, uint32_t& x) const { x = static_cast<uint32_t>(o.uint(name)); }
  void operator()(const char* name, bool& x) const { x = o.boolean(name); }
  void operator()(const char* name, double& x) const { x = o.number(name); }
  void operator()(const char* name, Problem& x) const { x = problem_at(o.at(name), o.path(name)); }
  void operator()(const char* name, KernelConfig& x) const { x = config_at(o.at(name), o.path(name)); }
  void operator()(const char* name, TimingStatus& x) const {
    try {
      x = parse_timing_status(o.str(name));
    } catch (const std::invalid_argument& e) {
      throw WireError(o.path(name) + ": " + e.what());
    }
  }
  void operator()(const char* name, std::map<std::string, int64_t>& x) const {
    const json& extra = o.at(name);
    if (!extra.is_object()) throw WireError(o.path(name) + ": expected object");
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      if (!it.value().is_number_integer()) throw WireError(o.path(name) + "." + it.key() + ": expected integer");
      x[it.key()] = it.value().get<int64_t>();
    }
  }
};

// Every field of T from the object at `j`, no other key.
template <class T>
static T fields_at(const json& j, const std::string& path) {
  Obj o(j, path);
  T x;
  visit(x, FromJsonField{o});
  o.done();
  return x;
}

static HardwareId hardware_at(const json& j, const std::string& path) {
  HardwareId h = fields_at<HardwareId>(j, path);
  wire::validate(h, path);
  return h;
}

// Every field of a Problem; "scale" may be absent (then "none").
static Problem problem_at(const json& j, const std::string& path) {
  Obj o(j, path);
  Problem p;
  visit(p, [&](const char* name, auto& x) {
    if constexpr (std::is_same_v<std::remove_reference_t<decltype(x)>, std::string>)
      if (&x == &p.scale && !o.has(name)) return;
    FromJsonField{o}(name, x);
  });
  o.done();
  wire::validate(p, path);
  return p;
}

static KernelConfig config_at(const json& j, const std::string& path) {
  KernelConfig c = fields_at<KernelConfig>(j, path);
  wire::validate(c, path);
  return c;
}

static Producer producer_at(const json& j, const std::string& path) { return fields_at<Producer>(j, path); }

HardwareId hardware_from_json(const json& j) { return hardware_at(j, "hardware"); }
Problem problem_from_json(const json& j) { return problem_at(j, "problem"); }
KernelConfig config_from_json(const json& j) { return config_at(j, "config"); }
Producer producer_from_json(const json& j) { return producer_at(j, "producer"); }

TimingRecord record_from_json(const json& j) { return fields_at<TimingRecord>(j, "record"); }

Shard shard_from_json(const json& j) {
  Obj o(j, "shard");
  Shard s;
  // wire_version, method, problem_wall_s and templates are optional: a shard
  // without them is a version 2 shard with no method, no wall times and no
  // templates (sealing makes it version 3 if a problem needs that).
  if (o.has("wire_version")) {
    s.wire_version = o.uint("wire_version");
    if (s.wire_version < wire::kMinVersion || s.wire_version > wire::kMaxVersion)
      throw WireError("shard.wire_version: unsupported wire version " + std::to_string(s.wire_version));
  }
  if (o.has("method")) {
    Obj m(o.at("method"), "shard.method");
    s.method.timing = m.str("timing");
    s.method.collector = m.str("collector");
    m.done();
  }
  if (o.has("problem_wall_s")) {
    const json& wall = o.at("problem_wall_s");
    if (!wall.is_array()) throw WireError("shard.problem_wall_s: expected array");
    for (size_t i = 0; i < wall.size(); ++i) {
      if (!wall[i].is_number()) throw WireError("shard.problem_wall_s[" + std::to_string(i) + "]: expected number");
      s.problem_wall_s.push_back(wall[i].get<double>());
    }
  }
  s.id = o.str("id");
  s.sweep_id = o.str("sweep_id");
  s.hardware = hardware_at(o.at("hardware"), "shard.hardware");
  s.producer = producer_at(o.at("producer"), "shard.producer");
  s.created_ms = o.uint("created_ms");
  const json& problems = o.at("problems");
  if (!problems.is_array()) throw WireError("shard.problems: expected array");
  for (size_t i = 0; i < problems.size(); ++i)
    s.problems.push_back(problem_at(problems[i], "shard.problems[" + std::to_string(i) + "]"));
  const json& records = o.at("records");
  if (!records.is_array()) throw WireError("shard.records: expected array");
  for (size_t i = 0; i < records.size(); ++i) {
    std::string path = "shard.records[" + std::to_string(i) + "]";
    ShardRecord r = fields_at<ShardRecord>(records[i], path);
    if (r.problem_index >= s.problems.size()) throw WireError(path + ".problem_index: out of range");
    s.records.push_back(std::move(r));
  }
  if (!s.problem_wall_s.empty()) {
    if (s.problem_wall_s.size() != s.problems.size())
      throw WireError("shard.problem_wall_s: expected 0 or " + std::to_string(s.problems.size()) +
                      " values (one per problem), got " + std::to_string(s.problem_wall_s.size()));
    for (size_t i = 0; i < s.problem_wall_s.size(); ++i)
      if (!std::isfinite(s.problem_wall_s[i]) || s.problem_wall_s[i] < 0)
        throw WireError("shard.problem_wall_s[" + std::to_string(i) + "]: must be finite and >= 0");
  }
  if (o.has("templates")) {
    const json& templates = o.at("templates");
    if (!templates.is_array()) throw WireError("shard.templates: expected array");
    for (size_t i = 0; i < templates.size(); ++i)
      s.templates.push_back(fields_at<TemplateSource>(templates[i], "shard.templates[" + std::to_string(i) + "]"));
    wire::validate_templates(s.templates);
  }
  wire::seal(s);  // throws if method, wall times or a version 3 field are set in a version 1 shard
  if (o.has("sha256")) {
    if (o.str("sha256") != to_hex(s.sha256)) throw WireError("shard.sha256: does not match the content");
  }
  o.done();
  return s;
}

}  // namespace diode
