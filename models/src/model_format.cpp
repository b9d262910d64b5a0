#include "model_format.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <msgpack.hpp>
#include <map>
#include <set>
#include <stdexcept>

#include "diode/error.h"
#include "diode/io.h"
#include "diode/model_shapes.h"

namespace diode::models {

static_assert(std::endian::native == std::endian::little, "weights are stored little-endian");

namespace {
constexpr const char* kMagic = "diode-weights";
constexpr uint64_t kVersion = 1, kMaxTensors = 1024, kMaxBytes = 64u << 20;
[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw WireError(where + ": " + what);
}
// o[name], an integer in [lo, hi] (a bool or a float is not one), else WireError naming where.name.
int int_field(const nlohmann::json& o, const std::string& where, const char* name, int lo, int hi) {
  if (!o.contains(name) || !o[name].is_number_integer() || o[name].get<int64_t>() < lo || o[name].get<int64_t>() > hi)
    bad(where + "." + name, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return o[name].get<int>();
}
// A single model's weights are its architecture's tensors, in the format's order; `who` names
// the model in the message (an ensemble member, the pre-filter). make_ensemble and
// with_prefilter join such models and rename their tensors, so they check this first.
void check_single_model_weights(const ModelDir& m, const std::string& who) {
  const auto single = m.arch.tensor_shapes();
  if (m.weights.size() != single.size()) throw std::invalid_argument(who + ": weights do not match the architecture");
  for (size_t t = 0; t < single.size(); ++t)
    if (m.weights[t].name != single[t].first || m.weights[t].shape != single[t].second)
      throw std::invalid_argument(who + ": weight " + m.weights[t].name + " out of the architecture's order");
}
}  // namespace

std::vector<std::pair<std::string, std::vector<uint64_t>>> Architecture::tensor_shapes() const {
  auto t = residual_mlp_tensors(uint64_t(input), uint64_t(hidden), uint64_t(blocks), uint64_t(members));
  if (has_prefilter())  // after every member's
    for (auto& ts : prefilter_tensors(uint64_t(input), uint64_t(prefilter.hidden), uint64_t(prefilter.blocks)))
      t.push_back(std::move(ts));
  return t;
}

nlohmann::json Architecture::to_json() const {
  nlohmann::json j = {{"kind", "residual_mlp"}, {"input", input}, {"hidden", hidden}, {"blocks", blocks},
                      {"activation", activation}};
  if (members > 1) {
    j["members"] = members;
    j["cascade"] = cascade;
  }
  if (has_prefilter())
    j["prefilter"] = {{"hidden", prefilter.hidden}, {"blocks", prefilter.blocks}, {"keep", prefilter.keep}};
  return j;
}

Architecture Architecture::from_json(const nlohmann::json& j) {
  if (!j.is_object()) bad("model.json architecture", "expected an object");
  if (j.value("kind", "") != "residual_mlp")
    bad("model.json architecture.kind", "unsupported architecture (this build reads residual_mlp)");
  const std::string where = "model.json architecture";
  Architecture a;
  a.input = int_field(j, where, "input", 1, kMaxInput);
  a.hidden = int_field(j, where, "hidden", 1, kMaxHidden);
  a.blocks = int_field(j, where, "blocks", 0, kMaxBlocks);
  a.activation = j.value("activation", "");
  if (a.activation != "relu" && a.activation != "silu")
    bad("model.json architecture.activation", "expected relu or silu");
  if (j.contains("members")) a.members = int_field(j, where, "members", 1, kMaxEnsembleMembers);
  if (a.members > 1) {
    if (!j.contains("cascade")) bad("model.json architecture.cascade", "required when members > 1");
    a.cascade = int_field(j, where, "cascade", 1, kMaxCascade);
  } else if (j.contains("cascade")) {
    bad("model.json architecture.cascade", "only an ensemble (members > 1) has a cascade");
  }
  if (j.contains("prefilter")) {
    const std::string pw = where + ".prefilter";
    if (a.members < 2) bad(pw, "only an ensemble (members > 1) has a pre-filter");
    const nlohmann::json& p = j.at("prefilter");
    // Exactly these three keys: a misspelt or unknown one would otherwise be ignored silently.
    if (!p.is_object() || p.size() != 3 || !p.contains("hidden") || !p.contains("blocks") || !p.contains("keep"))
      bad(pw, "expected an object with exactly the integer keys hidden, blocks and keep");
    a.prefilter.hidden = int_field(p, pw, "hidden", 1, kMaxHidden);
    a.prefilter.blocks = int_field(p, pw, "blocks", 0, kMaxBlocks);
    a.prefilter.keep = int_field(p, pw, "keep", 1, kMaxPrefilterKeep);
  }
  return a;
}

std::string encode_weights(const std::vector<NamedTensor>& w) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(std::string(kMagic));
  pk.pack(kVersion);
  pk.pack_array(uint32_t(w.size()));
  for (const auto& t : w) {
    pk.pack_array(4);
    pk.pack(t.name);
    pk.pack(std::string("float32"));
    pk.pack(t.shape);
    const uint32_t n = uint32_t(t.data.size() * sizeof(float));
    pk.pack_bin(n);
    pk.pack_bin_body(reinterpret_cast<const char*>(t.data.data()), n);
  }
  return std::string(buf.data(), buf.size());
}

std::vector<NamedTensor> decode_weights(std::string_view bytes, const Architecture& arch) {
  const std::string where = "weights.msgpack";
  if (bytes.size() > kMaxBytes + (1u << 20)) bad(where, "larger than the 64 MiB limit");
  msgpack::object_handle oh;
  try {
    std::size_t off = 0;
    msgpack::unpack_limit limits(kMaxTensors * 4, 0, 256, kMaxBytes, 0, 6);
    oh = msgpack::unpack(bytes.data(), bytes.size(), off, nullptr, nullptr, limits);
    if (off != bytes.size()) bad(where, "trailing bytes");
  } catch (const msgpack::unpack_error& e) {
    bad(where, std::string("not valid msgpack (") + e.what() + ")");
  } catch (const std::length_error& e) {
    bad(where, std::string("over a size limit (") + e.what() + ")");
  }
  const msgpack::object& o = oh.get();
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 3) bad(where, "expected [magic, version, tensors]");
  const auto* top = o.via.array.ptr;
  if (top[0].type != msgpack::type::STR || top[0].as<std::string>() != kMagic) bad(where, "bad magic");
  if (top[1].type != msgpack::type::POSITIVE_INTEGER || top[1].as<uint64_t>() != kVersion)
    bad(where, "unsupported weights version");
  if (top[2].type != msgpack::type::ARRAY) bad(where, "tensors: expected an array");
  const auto expected = arch.tensor_shapes();
  if (top[2].via.array.size != expected.size())
    bad(where, "expected " + std::to_string(expected.size()) + " tensors for this architecture, got " +
                   std::to_string(top[2].via.array.size));
  std::vector<NamedTensor> out;
  uint64_t total = 0;
  for (uint32_t i = 0; i < top[2].via.array.size; ++i) {
    const std::string at = where + " tensors[" + std::to_string(i) + "]";
    const msgpack::object& t = top[2].via.array.ptr[i];
    if (t.type != msgpack::type::ARRAY || t.via.array.size != 4) bad(at, "expected [name, dtype, shape, data]");
    const auto* f = t.via.array.ptr;
    if (f[0].type != msgpack::type::STR || f[1].type != msgpack::type::STR || f[2].type != msgpack::type::ARRAY ||
        f[3].type != msgpack::type::BIN)
      bad(at, "wrong field types");
    NamedTensor nt;
    nt.name = f[0].as<std::string>();
    if (f[1].as<std::string>() != "float32") bad(at, "dtype must be float32");
    uint64_t count = 1;
    for (uint32_t d = 0; d < f[2].via.array.size; ++d) {
      if (f[2].via.array.ptr[d].type != msgpack::type::POSITIVE_INTEGER) bad(at, "shape must be uints");
      nt.shape.push_back(f[2].via.array.ptr[d].as<uint64_t>());
      count *= nt.shape.back();
      if (count > kMaxBytes) bad(at, "tensor too large");
    }
    if (nt.name != expected[i].first || nt.shape != expected[i].second)
      bad(at, "expected " + expected[i].first + " with the architecture's shape, got " + nt.name);
    if (uint64_t(f[3].via.bin.size) != count * 4) bad(at, "data is not prod(shape) * 4 bytes");
    total += count * 4;
    if (total > kMaxBytes) bad(where, "more than 64 MiB of weights");
    nt.data.resize(count);
    std::memcpy(nt.data.data(), f[3].via.bin.ptr, count * 4);
    out.push_back(std::move(nt));
  }
  return out;
}

nlohmann::json model_json(const ModelDir& m) {
  nlohmann::json j = {{"format", "diode-model"},     {"version", 1},         {"hardware_key", m.hardware_key},
                      {"architecture", m.arch.to_json()}, {"feature_spec", m.spec.to_json()}, {"target", "log_us"},
                      {"dataset", m.dataset},         {"metrics", m.metrics}, {"training", m.training}};
  if (m.provenance.is_object() && !m.provenance.empty()) j["provenance"] = m.provenance;
  if (m.spec.family != "gemm") j["family"] = m.spec.family;
  return j;
}

void add_provenance(nlohmann::json& prov, const Dataset& d, bool include_community) {
  if (!prov.is_object()) prov = nlohmann::json::object();
  std::set<std::string> torch, triton;
  std::map<std::string, std::set<std::string>> templates;
  for (const auto& v : prov.value("torch_versions", nlohmann::json::array())) torch.insert(v.get<std::string>());
  for (const auto& v : prov.value("triton_versions", nlohmann::json::array())) triton.insert(v.get<std::string>());
  const nlohmann::json known = prov.value("templates", nlohmann::json::object());
  for (const auto& [name, hashes] : known.items())
    for (const auto& h : hashes) templates[name].insert(h.get<std::string>());
  for (const Shard& s : d.shards) {
    if (s.records.empty() || (s.producer.runner == "community" && !include_community)) continue;
    if (!s.hardware.torch_version.empty()) torch.insert(s.hardware.torch_version);
    if (!s.hardware.triton_version.empty()) triton.insert(s.hardware.triton_version);
    for (const TemplateSource& t : s.templates) templates[t.name].insert(t.sha256);
  }
  prov["torch_versions"] = std::vector<std::string>(torch.begin(), torch.end());
  prov["triton_versions"] = std::vector<std::string>(triton.begin(), triton.end());
  if (!templates.empty()) {
    nlohmann::json t = nlohmann::json::object();
    for (const auto& [name, hashes] : templates) t[name] = std::vector<std::string>(hashes.begin(), hashes.end());
    prov["templates"] = t;
  }
}

nlohmann::json dataset_provenance(const Dataset& d, bool include_community) {
  nlohmann::json prov = nlohmann::json::object();
  add_provenance(prov, d, include_community);
  return prov;
}

void save_model_dir(const std::string& dir, const ModelDir& m) {
  std::filesystem::create_directories(dir);
  io::write_file_atomic(dir + "/weights.msgpack", encode_weights(m.weights));
  io::write_file_atomic(dir + "/model.json", model_json(m).dump(2) + "\n");
}

ModelDir load_model_dir(const std::string& dir) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(io::read_file(dir + "/model.json", 4u << 20));
  } catch (const nlohmann::json::parse_error& e) {
    bad(dir + "/model.json", std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("format", "") != "diode-model") bad("model.json format", "expected diode-model");
  if (!j.contains("version") || j["version"] != 1) bad("model.json version", "unsupported (this build reads 1)");
  if (j.value("target", "") != "log_us") bad("model.json target", "expected log_us");
  ModelDir m;
  m.hardware_key = j.value("hardware_key", "");
  if (m.hardware_key.empty()) bad("model.json hardware_key", "missing");
  m.arch = Architecture::from_json(j.at("architecture"));
  m.spec = FeatureSpec::from_json(j.at("feature_spec"));
  if (j.contains("family")) {
    if (!j["family"].is_string()) bad("model.json family", "expected a string");
    const std::string family = j["family"].get<std::string>();
    const auto& fams = feature_families();
    if (std::find(fams.begin(), fams.end(), family) == fams.end())
      bad("model.json family", "unknown decision family '" + family + "' (this build knows gemm and scaled_mm)");
    if (family != m.spec.family)
      bad("model.json family", "'" + family + "' differs from the feature spec's family '" + m.spec.family + "'");
  } else if (m.spec.family != "gemm") {
    bad("model.json family", "missing while the feature spec is of family '" + m.spec.family + "'");
  }
  if (m.spec.size() != size_t(m.arch.input))
    bad("model.json architecture.input", "differs from the feature spec's feature count");
  m.dataset = j.value("dataset", nlohmann::json::object());
  m.metrics = j.value("metrics", nlohmann::json::object());
  m.training = j.value("training", nlohmann::json::object());
  m.provenance = j.value("provenance", nlohmann::json::object());
  if (!m.provenance.is_object()) bad("model.json provenance", "expected an object");
  m.weights = decode_weights(io::read_file(dir + "/weights.msgpack", 72u << 20), m.arch);
  return m;
}

ModelDir make_ensemble(const std::vector<ModelDir>& members, int cascade) {
  if (members.size() < 2 || members.size() > size_t(kMaxEnsembleMembers))
    throw std::invalid_argument("an ensemble has 2 to " + std::to_string(kMaxEnsembleMembers) + " members, got " +
                                std::to_string(members.size()));
  if (cascade < 1 || cascade > kMaxCascade)
    throw std::invalid_argument("cascade must be in [1, " + std::to_string(kMaxCascade) + "]");
  const ModelDir& first = members.front();
  ModelDir e;
  e.hardware_key = first.hardware_key;
  e.arch = first.arch;
  e.spec = first.spec;
  e.dataset = first.dataset;
  e.provenance = first.provenance;  // the members' dataset is one, so is where it came from
  e.training = {{"ensemble", nlohmann::json::array()}};
  for (size_t i = 0; i < members.size(); ++i) {
    const ModelDir& m = members[i];
    const std::string who = "member " + std::to_string(i);
    if (m.arch.members != 1) throw std::invalid_argument(who + " is itself an ensemble");
    if (m.hardware_key != first.hardware_key) throw std::invalid_argument(who + ": another hardware key");
    if (m.arch.to_json() != first.arch.to_json()) throw std::invalid_argument(who + ": another architecture");
    // Ranking normalises the features once, with member 0's spec: the members must share it.
    if (m.spec.to_json() != first.spec.to_json()) throw std::invalid_argument(who + ": another feature spec");
    if (m.dataset != first.dataset) throw std::invalid_argument(who + ": trained on another dataset");
    e.training["ensemble"].push_back(m.training);
    check_single_model_weights(m, who);
    e.weights.insert(e.weights.end(), m.weights.begin(), m.weights.end());
  }
  e.arch.members = int(members.size());
  e.arch.cascade = cascade;
  // The member-major names of the format (diode/model_shapes.h), in the same order.
  const auto names = e.arch.tensor_shapes();
  for (size_t t = 0; t < e.weights.size(); ++t) e.weights[t].name = names.at(t).first;
  return e;
}

ModelDir with_prefilter(const ModelDir& ensemble, const ModelDir& small, int keep) {
  if (ensemble.arch.members < 2)
    throw std::invalid_argument("a pre-filter goes with an ensemble (members > 1), not a single model");
  if (ensemble.arch.has_prefilter()) throw std::invalid_argument("the ensemble already has a pre-filter");
  if (keep < 1 || keep > kMaxPrefilterKeep)
    throw std::invalid_argument("the pre-filter's keep must be in [1, " + std::to_string(kMaxPrefilterKeep) +
                                "], got " + std::to_string(keep));
  const std::string who = "the pre-filter";
  if (small.arch.members != 1 || small.arch.has_prefilter())
    throw std::invalid_argument(who + " must be a single model (members 1), not an ensemble");
  if (small.hardware_key != ensemble.hardware_key)
    throw std::invalid_argument(who + ": another hardware key (" + small.hardware_key + ", the ensemble's is " +
                                ensemble.hardware_key + ")");
  // It scores the same normalised feature rows as the members (normalised once, with the
  // ensemble's spec), through the same activation.
  if (small.arch.input != ensemble.arch.input)
    throw std::invalid_argument(who + ": another input width (" + std::to_string(small.arch.input) +
                                ", the ensemble's is " + std::to_string(ensemble.arch.input) + ")");
  if (small.arch.activation != ensemble.arch.activation)
    throw std::invalid_argument(who + ": another activation (" + small.arch.activation + ", the ensemble's is " +
                                ensemble.arch.activation + ")");
  if (small.spec.to_json() != ensemble.spec.to_json()) throw std::invalid_argument(who + ": another feature spec");
  if (small.dataset != ensemble.dataset) throw std::invalid_argument(who + ": trained on another dataset");
  check_single_model_weights(small, who);
  ModelDir e = ensemble;
  e.arch.prefilter = {small.arch.hidden, small.arch.blocks, keep};
  for (NamedTensor t : small.weights) {
    t.name = "prefilter." + t.name;
    e.weights.push_back(std::move(t));
  }
  e.training["prefilter"] = small.training;
  e.metrics = nlohmann::json::object();
  return e;
}

}  // namespace diode::models
