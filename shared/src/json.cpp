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

json to_json(const HardwareId& h) {
  return {{"vendor", h.vendor}, {"device_name", h.device_name}, {"arch", h.arch},
          {"compute_capability", h.compute_capability}, {"sm_count", h.sm_count},
          {"memory_bytes", h.memory_bytes}, {"driver_version", h.driver_version},
          {"runtime_version", h.runtime_version}, {"torch_version", h.torch_version},
          {"triton_version", h.triton_version}};
}

json to_json(const Problem& p) {
  return {{"op", p.op}, {"batch", p.batch}, {"m", p.m}, {"n", p.n}, {"k", p.k},
          {"dtype_a", p.dtype_a}, {"dtype_b", p.dtype_b}, {"dtype_out", p.dtype_out},
          {"trans_a", p.trans_a}, {"trans_b", p.trans_b}, {"bias", p.bias},
          {"alpha", p.alpha}, {"beta", p.beta}};
}

json to_json(const KernelConfig& c) {
  json extra = json::object();
  for (const auto& [k, v] : c.extra) extra[k] = v;
  return {{"template", c.template_id}, {"block_m", c.block_m}, {"block_n", c.block_n},
          {"block_k", c.block_k}, {"group_m", c.group_m}, {"num_stages", c.num_stages},
          {"num_warps", c.num_warps}, {"even_k", c.even_k}, {"allow_tf32", c.allow_tf32},
          {"use_fast_accum", c.use_fast_accum}, {"acc_type", c.acc_type}, {"extra", extra}};
}

static json timing_json(double median, double spread, uint64_t repeats, TimingStatus st, uint64_t flags) {
  return {{"median_us", median}, {"spread_us", spread}, {"repeats", repeats},
          {"status", to_string(st)}, {"flags", flags}};
}

json to_json(const TimingRecord& r) {
  json j = timing_json(r.median_us, r.spread_us, r.repeats, r.status, r.flags);
  j["problem"] = to_json(r.problem);
  j["config"] = to_json(r.config);
  return j;
}

json to_json(const Producer& p) {
  return {{"name", p.name}, {"public_key", p.public_key}, {"runner", p.runner},
          {"software_version", p.software_version}};
}

json to_json(const Shard& s) {
  json problems = json::array();
  for (const auto& p : s.problems) problems.push_back(to_json(p));
  json records = json::array();
  for (const auto& r : s.records) {
    json j = timing_json(r.median_us, r.spread_us, r.repeats, r.status, r.flags);
    j["problem_index"] = r.problem_index;
    j["config"] = to_json(r.config);
    records.push_back(std::move(j));
  }
  return {{"wire_version", s.wire_version}, {"id", s.id}, {"sweep_id", s.sweep_id},
          {"hardware", to_json(s.hardware)}, {"producer", to_json(s.producer)}, {"created_ms", s.created_ms},
          {"problems", problems}, {"records", records},
          {"method", {{"timing", s.method.timing}, {"collector", s.method.collector}}},
          {"problem_wall_s", s.problem_wall_s}, {"sha256", to_hex(s.sha256)}};
}

static HardwareId hardware_at(const json& j, const std::string& path) {
  Obj o(j, path);
  HardwareId h;
  h.vendor = o.str("vendor");
  h.device_name = o.str("device_name");
  h.arch = o.str("arch");
  h.compute_capability = o.str("compute_capability");
  h.sm_count = o.uint("sm_count");
  h.memory_bytes = o.uint("memory_bytes");
  h.driver_version = o.str("driver_version");
  h.runtime_version = o.str("runtime_version");
  h.torch_version = o.str("torch_version");
  h.triton_version = o.str("triton_version");
  o.done();
  wire::validate(h, path);
  return h;
}

static Problem problem_at(const json& j, const std::string& path) {
  Obj o(j, path);
  Problem p;
  p.op = o.str("op");
  p.batch = o.uint("batch");
  p.m = o.uint("m");
  p.n = o.uint("n");
  p.k = o.uint("k");
  p.dtype_a = o.str("dtype_a");
  p.dtype_b = o.str("dtype_b");
  p.dtype_out = o.str("dtype_out");
  p.trans_a = o.boolean("trans_a");
  p.trans_b = o.boolean("trans_b");
  p.bias = o.str("bias");
  p.alpha = o.number("alpha");
  p.beta = o.number("beta");
  o.done();
  wire::validate(p, path);
  return p;
}

static KernelConfig config_at(const json& j, const std::string& path) {
  Obj o(j, path);
  KernelConfig c;
  c.template_id = o.str("template");
  c.block_m = o.uint("block_m");
  c.block_n = o.uint("block_n");
  c.block_k = o.uint("block_k");
  c.group_m = o.uint("group_m");
  c.num_stages = o.uint("num_stages");
  c.num_warps = o.uint("num_warps");
  c.even_k = o.boolean("even_k");
  c.allow_tf32 = o.boolean("allow_tf32");
  c.use_fast_accum = o.boolean("use_fast_accum");
  c.acc_type = o.str("acc_type");
  const json& extra = o.at("extra");
  if (!extra.is_object()) throw WireError(o.path("extra") + ": expected object");
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    if (!it.value().is_number_integer()) throw WireError(o.path("extra") + "." + it.key() + ": expected integer");
    c.extra[it.key()] = it.value().get<int64_t>();
  }
  o.done();
  wire::validate(c, path);
  return c;
}

template <typename R>
static void timing_at(Obj& o, R& r) {
  r.median_us = o.number("median_us");
  r.spread_us = o.number("spread_us");
  r.repeats = o.uint("repeats");
  try {
    r.status = parse_timing_status(o.str("status"));
  } catch (const std::invalid_argument& e) {
    throw WireError(o.path("status") + ": " + e.what());
  }
  r.flags = o.uint("flags");
}

static Producer producer_at(const json& j, const std::string& path) {
  Obj o(j, path);
  Producer p;
  p.name = o.str("name");
  p.public_key = o.str("public_key");
  p.runner = o.str("runner");
  p.software_version = o.str("software_version");
  o.done();
  return p;
}

HardwareId hardware_from_json(const json& j) { return hardware_at(j, "hardware"); }
Problem problem_from_json(const json& j) { return problem_at(j, "problem"); }
KernelConfig config_from_json(const json& j) { return config_at(j, "config"); }
Producer producer_from_json(const json& j) { return producer_at(j, "producer"); }

TimingRecord record_from_json(const json& j) {
  Obj o(j, "record");
  TimingRecord r;
  r.problem = problem_at(o.at("problem"), "record.problem");
  r.config = config_at(o.at("config"), "record.config");
  timing_at(o, r);
  o.done();
  return r;
}

Shard shard_from_json(const json& j) {
  Obj o(j, "shard");
  Shard s;
  // wire_version, method and problem_wall_s are optional: a shard without
  // them is a version 2 shard with no method and no wall times.
  if (o.has("wire_version")) {
    s.wire_version = o.uint("wire_version");
    if (s.wire_version < wire::kMinVersion || s.wire_version > wire::kVersion)
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
    Obj ro(records[i], path);
    ShardRecord r;
    r.problem_index = static_cast<uint32_t>(ro.uint("problem_index"));
    if (r.problem_index >= s.problems.size()) throw WireError(path + ".problem_index: out of range");
    r.config = config_at(ro.at("config"), path + ".config");
    timing_at(ro, r);
    ro.done();
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
  wire::seal(s);  // throws if method or wall times are set in a version 1 shard
  if (o.has("sha256")) {
    if (o.str("sha256") != to_hex(s.sha256)) throw WireError("shard.sha256: does not match the content");
  }
  o.done();
  return s;
}

}  // namespace diode
