// C++'s definitions agree with shared/schema/contracts.json (issue 54, "One schema").
//
// tests/python/test_schema.py checks the Python side against the same file, so a change
// to either language that is not also made in the schema fails here or there. Checked:
// the field names and order the encoders write (a sample of every kind is encoded and
// each msgpack array position compared with the JSON form's value of the schema's field
// name), the decoder's per-field limits (exact messages), enums, message limits, record
// flag bits, feature names, and the hardware-key examples.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "diode/features.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/json.h"
#include "diode/sha256.h"
#include "diode/wire.h"
#include "test_util.h"

namespace diode {
namespace {

using nlohmann::json;

const json& schema() {
  static const json s = json::parse(io::read_file(DIODE_SCHEMA_FILE));
  return s;
}
const json& wire_schema() { return schema().at("wire"); }
const json& types() { return wire_schema().at("types"); }

// The fields of a type in wire `version` (the shard's method and wall times are version 2,
// the problem's scale and the shard's templates version 3).
std::vector<json> fields(const std::string& type, uint64_t version = wire::kMaxVersion) {
  std::vector<json> out;
  for (const auto& f : types().at(type))
    if (f.value("since", uint64_t{0}) <= version) out.push_back(f);
  return out;
}

Problem sample_problem() {
  Problem p;
  p.op = "addmm";
  p.m = 1000;
  p.n = 2000;
  p.k = 3000;
  p.dtype_a = "bfloat16";
  p.dtype_out = "float32";
  p.trans_a = true;
  p.bias = "row";
  p.alpha = 0.5;
  p.beta = 2.0;
  return p;
}

// A scaled_mm problem: written in wire version 3.
Problem sample_problem_v3() {
  Problem p;
  p.op = "scaled_mm";
  p.m = 4096;
  p.n = 1024;
  p.k = 2048;
  p.dtype_a = p.dtype_b = "float8_e4m3fn";
  p.dtype_out = "bfloat16";
  p.trans_b = true;
  p.scale = "row";
  return p;
}

KernelConfig sample_config() {
  KernelConfig c;
  c.block_m = 64;
  c.block_n = 128;
  c.block_k = 32;
  c.group_m = 8;
  c.num_stages = 3;
  c.num_warps = 4;
  c.even_k = true;
  c.use_fast_accum = true;
  c.acc_type = "float32";
  c.extra = {{"NUM_SMS", 132}, {"k_split", -2}};
  return c;
}

TimingRecord sample_record() {
  TimingRecord r;
  r.problem = sample_problem();
  r.config = sample_config();
  r.median_us = 12.5;
  r.spread_us = 0.25;
  r.repeats = 17;
  r.flags = 0b1010;
  return r;
}

HardwareId sample_hardware() {
  return {"nvidia", "NVIDIA H100 80GB HBM3", "sm_90", "9.0", 132, 85523536281, "580.1", "cuda 13.0", "2.11.0", "3.6.0"};
}

Shard sample_shard(uint64_t version) {
  Shard s;
  s.wire_version = version;
  s.id = "shard-1";
  s.sweep_id = "sweep-1";
  s.hardware = sample_hardware();
  s.producer = {"host/gpu0", "key", "inductor", "diode 0.1.0"};
  s.created_ms = 1764000000000;
  s.problems = {sample_problem(), Problem{}};
  s.problems[1].m = s.problems[1].n = s.problems[1].k = 1;
  ShardRecord a;
  a.problem_index = 1;
  a.config = sample_config();
  a.median_us = 3.0;
  a.spread_us = 0.5;
  a.repeats = 9;
  a.flags = 2;
  ShardRecord b;
  b.config.template_id = "aten";
  b.status = TimingStatus::timeout;
  s.records = {a, b};
  if (version >= 2) {
    s.method = {"cuda-events", "torch_diode.collect 2.6.0"};
    s.problem_wall_s = {1.5, 2.25};
  }
  if (version == 3) {
    s.wire_version = 2;  // sealing a shard with version 3 fields makes it version 3
    s.problems[1] = sample_problem_v3();
    s.templates = {{"triton::mm", std::string(64, 'a')}, {"triton::scaled_mm", std::string(64, '0')}};
  }
  wire::seal(s);
  return s;
}

TimingRecord sample_record_v3() {
  TimingRecord r = sample_record();
  r.problem = sample_problem_v3();
  return r;
}

// The encoded sample of each kind and its JSON form.
std::pair<std::string, json> sample(const std::string& kind) {
  if (kind == "hardware") return {wire::encode(sample_hardware()), to_json(sample_hardware())};
  if (kind == "problem") return {wire::encode(sample_problem()), to_json(sample_problem())};
  if (kind == "config") return {wire::encode(sample_config()), to_json(sample_config())};
  if (kind == "record") return {wire::encode(sample_record()), to_json(sample_record())};
  if (kind == "shard") return {wire::encode(sample_shard(2)), to_json(sample_shard(2))};
  if (kind == "shard_v1") return {wire::encode(sample_shard(1)), to_json(sample_shard(1))};
  if (kind == "problem_v3") return {wire::encode(sample_problem_v3()), to_json(sample_problem_v3())};
  if (kind == "record_v3") return {wire::encode(sample_record_v3()), to_json(sample_record_v3())};
  if (kind == "shard_v3") return {wire::encode(sample_shard(3)), to_json(sample_shard(3))};
  throw std::invalid_argument(kind);
}

// The message kind of a sample name ("shard_v1" -> "shard").
std::string kind_of(const std::string& sample_name) { return sample_name.substr(0, sample_name.find('_')); }
// The wire version a sample is written in.
uint64_t version_of(const std::string& sample_name) {
  if (sample_name == "shard_v1") return wire_schema().at("min_version");
  if (sample_name.size() > 3 && sample_name.substr(sample_name.size() - 3) == "_v3") return wire_schema().at("version");
  return wire_schema().at("base_version");
}

void decode_kind(const std::string& kind, std::string_view bytes) {
  if (kind == "hardware") (void)wire::decode_hardware(bytes);
  else if (kind == "problem") (void)wire::decode_problem(bytes);
  else if (kind == "config") (void)wire::decode_config(bytes);
  else if (kind == "record") (void)wire::decode_record(bytes);
  else if (kind == "shard") (void)wire::decode_shard(bytes);
  else throw std::invalid_argument(kind);
}

// The JSON form leaves out a problem's scale "none" and a shard's empty templates.
const json kOmitted = json::object({{"scale", "none"}, {"templates", json::array()}});

// `value` is a decoded msgpack item (json::from_msgpack) of a message of wire `version`,
// `form` the JSON form of the same thing.
void check_matches(const json& value, const json& form, const std::string& type, const std::string& path,
                   uint64_t version) {
  SCOPED_TRACE(path);
  if (types().contains(type)) {
    if (type == "shard") {
      EXPECT_EQ(form.at("wire_version").get<uint64_t>(), version);
    }
    const auto fs = fields(type, version);
    ASSERT_TRUE(value.is_array());
    ASSERT_EQ(value.size(), fs.size());
    for (size_t i = 0; i < fs.size(); ++i) {
      const std::string name = fs[i].at("name");
      const json& sub = form.contains(name) ? form.at(name) : kOmitted.value(name, json());
      ASSERT_FALSE(sub.is_null()) << name;
      check_matches(value[i], sub, fs[i].at("type"), path + "." + name, version);
    }
  } else if (type.rfind("array<", 0) == 0) {
    const std::string inner = type.substr(6, type.size() - 7);
    ASSERT_TRUE(value.is_array());
    ASSERT_EQ(value.size(), form.size());
    for (size_t i = 0; i < value.size(); ++i)
      check_matches(value[i], form[i], inner, path + "[" + std::to_string(i) + "]", version);
  } else if (type == "bin32") {
    ASSERT_TRUE(value.is_binary());
    ASSERT_EQ(value.get_binary().size(), 32u);
    Sha256Digest d;
    std::copy(value.get_binary().begin(), value.get_binary().end(), d.begin());
    EXPECT_EQ(to_hex(d), form.get<std::string>());
  } else if (type == "extra") {
    ASSERT_TRUE(value.is_object());
    EXPECT_EQ(value, form);
  } else if (type == "float64") {
    ASSERT_TRUE(value.is_number_float());
    EXPECT_EQ(value.get<double>(), form.get<double>());
  } else if (type == "uint") {
    ASSERT_TRUE(value.is_number_unsigned());
    EXPECT_EQ(value.get<uint64_t>(), form.get<uint64_t>());
  } else if (type == "bool") {
    ASSERT_TRUE(value.is_boolean());
    EXPECT_EQ(value, form);
  } else if (type == "str") {
    ASSERT_TRUE(value.is_string());
    EXPECT_EQ(value, form);
  } else {
    FAIL() << "unknown schema type " << type;
  }
}

TEST(Schema, TypesAreClosed) {
  std::set<std::string> known = {"str", "uint", "bool", "float64", "extra", "bin32"};
  for (const auto& [name, fs] : types().items()) known.insert(name);
  for (const auto& [name, fs] : types().items()) {
    std::set<std::string> names;
    for (const auto& f : fs) {
      names.insert(f.at("name").get<std::string>());
      std::string t = f.at("type");
      if (t.rfind("array<", 0) == 0) t = t.substr(6, t.size() - 7);
      EXPECT_TRUE(known.count(t)) << name << "." << f.at("name");
      if (f.at("type") == "uint") {
        EXPECT_TRUE(f.contains("range")) << name << "." << f.at("name");
      }
    }
    EXPECT_EQ(names.size(), fs.size()) << name;
  }
}

TEST(Schema, EncoderWritesTheSchemaFieldsInOrder) {
  const json& env = wire_schema().at("envelope");
  for (const std::string kind :
       {"hardware", "problem", "config", "record", "shard", "shard_v1", "problem_v3", "record_v3", "shard_v3"}) {
    SCOPED_TRACE(kind);
    const auto [bytes, form] = sample(kind);
    const json top = json::from_msgpack(bytes);
    ASSERT_TRUE(top.is_array());
    ASSERT_EQ(top.size(), env.at("fields").size());
    EXPECT_EQ(top[0], env.at("magic"));
    const std::string k = kind_of(kind);
    EXPECT_EQ(top[1].get<uint64_t>(), version_of(kind));
    EXPECT_EQ(top[2], k);
    check_matches(top[3], form, env.at("kinds").at(k), k, version_of(kind));
    EXPECT_NO_THROW(decode_kind(k, bytes));
  }
  // The decoder names the same fields (its error paths), here for the shard's last.
  std::string bytes = wire::encode(sample_shard(2));
  bytes[bytes.size() - 1] ^= 1;
  try {
    wire::decode_shard(bytes);
    FAIL();
  } catch (const WireError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("shard." + fields("shard").back().at("name").get<std::string>(), 0), 0u)
        << e.what();
  }
}

TEST(Schema, JsonFormHasTheSchemaFields) {
  // A GEMM problem's form has no "scale" (it is "none"), a scaled_mm one has it;
  // a shard's has "templates" only when there are some.
  for (const std::string kind : {"hardware", "problem", "config", "record", "problem_v3", "record_v3"}) {
    std::set<std::string> want, got;
    const std::string type = kind_of(kind);
    for (const auto& f : types().at(type)) want.insert(f.at("name"));
    if (type == "problem" && version_of(kind) < 3) want.erase("scale");
    const json form = sample(kind).second;
    for (const auto& [k, v] : form.items()) got.insert(k);
    EXPECT_EQ(got, want) << kind;
  }
  for (const std::string kind : {"shard", "shard_v3"}) {
    std::set<std::string> want = {"wire_version"}, got;
    for (const auto& f : types().at("shard")) want.insert(f.at("name"));
    if (kind == "shard") want.erase("templates");
    const json form = sample(kind).second;
    for (const auto& [k, v] : form.items()) got.insert(k);
    EXPECT_EQ(got, want) << kind;
    EXPECT_EQ(shard_from_json(form), kind == "shard" ? sample_shard(2) : sample_shard(3));
  }
  EXPECT_EQ(problem_from_json(sample("problem_v3").second), sample_problem_v3());
}

// A copy of `body` (of wire `version`) with the field at `path` (schema names) set to `v`.
json schema_test_set_field(json body, const std::string& type, const std::vector<std::string>& path, size_t at,
                           const json& v, uint64_t version = wire::kVersion) {
  const auto fs = fields(type, version);
  for (size_t i = 0; i < fs.size(); ++i) {
    if (fs[i].at("name") != path[at]) continue;
    body[i] = at + 1 == path.size() ? v : schema_test_set_field(body[i], fs[i].at("type"), path, at + 1, v, version);
    return body;
  }
  throw std::invalid_argument("no field " + path[at] + " in " + type);
}

std::string schema_test_rejected(const std::string& kind, const json& body, uint64_t version = wire::kVersion) {
  const json msg = json::array({"diode", version, kind, body});
  const auto v = json::to_msgpack(msg);
  try {
    decode_kind(kind, std::string_view(reinterpret_cast<const char*>(v.data()), v.size()));
  } catch (const WireError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Schema, DecoderEnforcesTheSchemaLimits) {
  int checked = 0;
  for (const std::string name : {"hardware", "problem", "config", "record", "problem_v3", "record_v3"}) {
    const std::string kind = kind_of(name);
    const uint64_t version = version_of(name);
    const json body = json::from_msgpack(sample(name).first)[3];
    auto expect_rejected = [&](const std::string& k, const json& b) { return schema_test_rejected(k, b, version); };
    auto set_field = [&](const json& b, const std::string& type, const std::vector<std::string>& path, size_t at,
                         const json& v) { return schema_test_set_field(b, type, path, at, v, version); };
    std::function<void(const std::string&, std::vector<std::string>)> walk = [&](const std::string& type,
                                                                                std::vector<std::string> prefix) {
      for (const auto& f : fields(type, version)) {
        auto path = prefix;
        path.push_back(f.at("name"));
        std::string where = kind;
        for (const auto& p : path) where += "." + p;
        if (types().contains(f.at("type").get<std::string>())) {
          walk(f.at("type"), path);
          continue;
        }
        if (f.contains("range")) {
          const uint64_t lo = f.at("range")[0], hi = f.at("range")[1];
          const std::string range = " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
          if (lo > 0) {
            EXPECT_EQ(expect_rejected(kind, set_field(body, kind, path, 0, lo - 1)), where + ": " + std::to_string(lo - 1) + range);
            ++checked;
          }
          if (hi < UINT64_MAX) {
            EXPECT_EQ(expect_rejected(kind, set_field(body, kind, path, 0, hi + 1)), where + ": " + std::to_string(hi + 1) + range);
            ++checked;
          }
        }
        if (f.contains("max_bytes")) {
          const size_t n = f.at("max_bytes");
          EXPECT_EQ(expect_rejected(kind, set_field(body, kind, path, 0, std::string(n + 1, 'x'))),
                    where + ": string longer than " + std::to_string(n) + " bytes");
          ++checked;
        }
      }
    };
    walk(kind, {});
  }
  EXPECT_GE(checked, 40);

  const json& lim = wire_schema().at("limits");
  const json config = json::from_msgpack(sample("config").first)[3];
  json extra = json::object();
  for (int i = 0; i <= lim.at("extra_entries").get<int>(); ++i) extra["k" + std::to_string(100 + i)] = i;
  EXPECT_EQ(schema_test_rejected("config", schema_test_set_field(config, "config", {"extra"}, 0, extra)),
            "config.extra: more than " + lim.at("extra_entries").dump() + " entries");
  const size_t key_bytes = lim.at("extra_key_bytes");
  EXPECT_EQ(schema_test_rejected("config", schema_test_set_field(config, "config", {"extra"}, 0,
                                                                 json::object({{std::string(key_bytes + 1, 'k'), 1}}))),
            "config.extra[0]: string longer than " + std::to_string(key_bytes) + " bytes");
}

TEST(Schema, MessageLimitsAndEnums) {
  const json& lim = wire_schema().at("limits");
  EXPECT_EQ(wire::kMaxVersion, wire_schema().at("version").get<uint64_t>());
  EXPECT_EQ(kMaxWireVersion, wire_schema().at("version").get<uint64_t>());
  EXPECT_EQ(wire::kVersion, wire_schema().at("base_version").get<uint64_t>());
  EXPECT_EQ(kWireVersion, wire_schema().at("base_version").get<uint64_t>());
  EXPECT_EQ(kMaxTemplates, lim.at("templates").get<size_t>());
  EXPECT_EQ(wire::kMinVersion, wire_schema().at("min_version").get<uint64_t>());
  EXPECT_EQ(wire::kMaxMessageBytes, lim.at("message_bytes").get<size_t>());
  EXPECT_EQ(wire::kMaxString, lim.at("string_bytes").get<size_t>());
  EXPECT_EQ(wire::kMaxProblems, lim.at("problems").get<size_t>());
  EXPECT_EQ(wire::kMaxRecords, lim.at("records").get<size_t>());
  EXPECT_EQ(wire::kMaxExtra, lim.at("extra_entries").get<size_t>());
  const json& e = wire_schema().at("enums");
  for (const auto& op : e.at("op")) EXPECT_TRUE(is_known_op(op));
  EXPECT_FALSE(is_known_op("conv"));
  for (const auto& d : e.at("dtype")) EXPECT_TRUE(is_known_dtype(d));
  EXPECT_FALSE(is_known_dtype("int8"));
  for (const auto& b : e.at("bias")) EXPECT_TRUE(is_known_bias(b));
  EXPECT_FALSE(is_known_bias("diag"));
  EXPECT_EQ(e.at("scale"), json({"none", "tensor", "row"}));
  for (const auto& s : e.at("scale")) EXPECT_TRUE(is_known_scale(s));
  EXPECT_FALSE(is_known_scale("block"));
  EXPECT_EQ(e.at("op"), json({"mm", "addmm", "bmm", "baddbmm", "scaled_mm"}));
  EXPECT_EQ(e.at("dtype"), json({"float16", "bfloat16", "float32", "float8_e4m3fn"}));
  // The problem's scale and the shard's templates are version 3 fields, templates before the hash.
  const json& problem = types().at("problem");
  EXPECT_EQ(problem.back(), json::parse(R"({"name": "scale", "type": "str", "enum": "scale", "since": 3, "max_bytes": 32})"));
  const json& shard = types().at("shard");
  EXPECT_EQ(shard[shard.size() - 2], json::parse(R"({"name": "templates", "type": "array<template_source>", "since": 3})"));
  EXPECT_EQ(shard.back().at("name"), "sha256");
  EXPECT_EQ(types().at("template_source"),
            json::parse(R"([{"name": "name", "type": "str", "max_bytes": 128},
                            {"name": "sha256", "type": "str", "regex": "^[0-9a-f]{64}$"}])"));
  EXPECT_EQ(kMaxTemplateName, types().at("template_source")[0].at("max_bytes").get<size_t>());
  EXPECT_EQ(field_names<TemplateSource>(), (std::vector<const char*>{"name", "sha256"}));
  std::vector<std::string> statuses;
  for (auto s : {TimingStatus::ok, TimingStatus::compile_error, TimingStatus::out_of_resources, TimingStatus::timeout})
    statuses.push_back(to_string(s));
  EXPECT_EQ(json(statuses), e.at("status"));
}

TEST(Schema, Families) {
  const json& fam = schema().at("families");
  std::vector<std::string> base = schema().at("features").at("base_names");
  std::vector<std::string> scaled = base;
  scaled.push_back("scale_rowwise");
  scaled.push_back("fast_accum");
  const json want = {{"gemm", {{"ops", {"mm", "addmm", "bmm", "baddbmm"}}, {"features", "features.base_names"}}},
                     {"scaled_mm",
                      {{"ops", {"scaled_mm"}}, {"dtypes", {"float8_e4m3fn"}}, {"scales", {"tensor", "row"}},
                       {"features", scaled}}}};
  EXPECT_EQ(fam, want);
  // Every op of the enum belongs to exactly the family that lists it.
  std::set<std::string> listed;
  for (const auto& [family, f] : fam.items())
    for (const auto& op : f.at("ops")) {
      EXPECT_EQ(family_of(op.get<std::string>()), family) << op;
      EXPECT_TRUE(listed.insert(op).second) << op;
    }
  EXPECT_EQ(listed.size(), wire_schema().at("enums").at("op").size());
  EXPECT_EQ(family_of("conv"), "");
  for (const auto& d : fam.at("scaled_mm").at("dtypes")) EXPECT_EQ(dtype_bytes(d), 1u);
}

// A template_source entry breaking each rule, with the message both languages give
// (tests/python/test_wire_v3.py checks the same list).
TEST(Schema, TemplateSourceRules) {
  const std::string h(64, 'a');
  const std::vector<std::pair<std::vector<TemplateSource>, std::string>> bad = {
      {{{"", h}}, "shard.templates[0].name: empty"},
      {{{std::string(129, 'n'), h}}, "shard.templates[0].name: string longer than 128 bytes"},
      {{{"a", std::string(64, 'A')}}, "shard.templates[0].sha256: expected 64 lower-case hex digits"},
      {{{"a", std::string(63, 'a')}}, "shard.templates[0].sha256: expected 64 lower-case hex digits"},
      {{{"a", h}, {"a", h}}, "shard.templates[1]: duplicate name 'a'"},
      {{{"b", h}, {"a", h}}, "shard.templates[1]: names not in sorted order"},
  };
  for (const auto& [ts, msg] : bad) {
    try {
      wire::validate_templates(ts);
      ADD_FAILURE() << "accepted: " << msg;
    } catch (const WireError& e) {
      EXPECT_EQ(std::string(e.what()), msg);
    }
  }
  std::vector<TemplateSource> many;
  for (size_t i = 0; i <= kMaxTemplates; ++i) many.push_back({"t" + std::to_string(100 + i), h});
  EXPECT_THROW(wire::validate_templates(many), WireError);
  many.pop_back();
  EXPECT_NO_THROW(wire::validate_templates(many));
}

TEST(Schema, RecordFlagBits) {
  const std::map<std::string, uint64_t> cpp = {{"kRecordReplayed", kRecordReplayed},
                                               {"kRecordInDefault", kRecordInDefault},
                                               {"kRecordNotRunnable", kRecordNotRunnable},
                                               {"kRecordStaticShape", kRecordStaticShape}};
  std::map<std::string, uint64_t> want;
  for (const auto& f : schema().at("record_flags").at("flags")) want[f.at("cpp")] = uint64_t{1} << f.at("bit").get<int>();
  EXPECT_EQ(cpp, want);
}

TEST(Schema, FeatureNames) {
  const json& fs = schema().at("features");
  EXPECT_EQ(json(base_feature_names()), fs.at("base_names"));
  FeatureSpec spec;
  EXPECT_EQ(FeatureSpec::kVersion, fs.at("spec_version").get<int>());
  EXPECT_EQ(json(spec.templates), fs.at("default_templates"));
  EXPECT_EQ(spec.sm_count, fs.at("default_sm_count").get<uint64_t>());
  std::vector<std::string> names = fs.at("base_names");
  for (const auto& t : fs.at("default_templates")) names.push_back(fs.at("template_name_prefix").get<std::string>() + t.get<std::string>());
  EXPECT_EQ(spec.names(), names);
  EXPECT_EQ(features(spec, sample_problem(), sample_config()).size(), names.size());
}

TEST(Schema, HardwareKey) {
  const json& hk = schema().at("hardware_key");
  for (const auto& ex : hk.at("examples")) {
    HardwareId h;
    h.vendor = ex.at("vendor");
    h.device_name = ex.at("device_name");
    h.memory_bytes = ex.at("memory_bytes");
    EXPECT_EQ(hardware_key(h), ex.at("key").get<std::string>()) << h.device_name;
    EXPECT_LE(hardware_key(h).size(), hk.at("max_len").get<size_t>());
  }
  for (const auto& k : hk.at("valid_keys")) EXPECT_TRUE(is_valid_hardware_key(k)) << k;
  for (const auto& k : hk.at("invalid_keys")) EXPECT_FALSE(is_valid_hardware_key(k)) << k;
  EXPECT_TRUE(is_valid_hardware_key(std::string(hk.at("max_len").get<size_t>(), 'a')));
}

}  // namespace
}  // namespace diode
