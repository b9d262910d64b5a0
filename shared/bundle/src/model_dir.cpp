#include "diode/bundle/model_dir.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <msgpack.hpp>

#include "diode/error.h"
#include "diode/features.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/model_shapes.h"
#include "diode/sha256.h"

namespace diode::bundle {

namespace {
[[noreturn]] void bad_weights(const std::string& why) { throw VerifyError("weights.msgpack: " + why); }

std::string str_of(const msgpack::object& o, const std::string& what) {
  if (o.type != msgpack::type::STR) bad_weights(what + " is not a string");
  return std::string(o.via.str.ptr, o.via.str.size);
}

}  // namespace

std::map<std::string, std::vector<uint64_t>> check_weights(std::string_view bytes) {
  if (bytes.size() > kMaxWeightBytes + (1u << 20)) bad_weights("larger than 64 MiB");
  msgpack::object_handle oh;
  try {
    // Limits: arrays, maps, str, bin, ext, depth.
    msgpack::unpack_limit lim(kMaxTensors, 0, 256, kMaxWeightBytes, 0, 5);
    std::size_t off = 0;
    oh = msgpack::unpack(bytes.data(), bytes.size(), off, nullptr, nullptr, lim);
    if (off != bytes.size()) bad_weights("trailing bytes after the top-level array");
  } catch (const msgpack::unpack_error& e) {
    bad_weights(std::string("cannot decode: ") + e.what());
  } catch (const std::bad_alloc&) {
    bad_weights("cannot decode: out of memory");
  }
  const msgpack::object& top = oh.get();
  if (top.type != msgpack::type::ARRAY || top.via.array.size != 3) bad_weights("top level is not a 3-element array");
  if (str_of(top.via.array.ptr[0], "magic") != "diode-weights") bad_weights("magic is not \"diode-weights\"");
  const auto& ver = top.via.array.ptr[1];
  if (ver.type != msgpack::type::POSITIVE_INTEGER || ver.via.u64 != 1) bad_weights("version is not 1");
  const auto& tensors = top.via.array.ptr[2];
  if (tensors.type != msgpack::type::ARRAY) bad_weights("tensors is not an array");
  if (tensors.via.array.size > kMaxTensors) bad_weights("more than 1,024 tensors");
  std::map<std::string, std::vector<uint64_t>> out;
  uint64_t total = 0;
  for (uint32_t i = 0; i < tensors.via.array.size; ++i) {
    const auto& t = tensors.via.array.ptr[i];
    const std::string w = "tensor " + std::to_string(i);
    if (t.type != msgpack::type::ARRAY || t.via.array.size != 4) bad_weights(w + " is not [name, dtype, shape, data]");
    const std::string name = str_of(t.via.array.ptr[0], w + " name");
    if (str_of(t.via.array.ptr[1], w + " dtype") != "float32") bad_weights(name + ": dtype is not float32");
    const auto& shape = t.via.array.ptr[2];
    if (shape.type != msgpack::type::ARRAY || shape.via.array.size > 8) bad_weights(name + ": shape is not an array of at most 8 dims");
    std::vector<uint64_t> dims;
    uint64_t count = 1;
    for (uint32_t k = 0; k < shape.via.array.size; ++k) {
      const auto& d = shape.via.array.ptr[k];
      if (d.type != msgpack::type::POSITIVE_INTEGER || d.via.u64 > kMaxWeightBytes) bad_weights(name + ": bad dimension");
      dims.push_back(d.via.u64);
      count *= d.via.u64;
      if (count > kMaxWeightBytes) bad_weights(name + ": too many elements");
    }
    const auto& data = t.via.array.ptr[3];
    if (data.type != msgpack::type::BIN) bad_weights(name + ": data is not bin");
    if (data.via.bin.size != count * 4)
      bad_weights(name + ": data is " + std::to_string(data.via.bin.size) + " bytes, shape needs " + std::to_string(count * 4));
    total += count * 4;
    if (total > kMaxWeightBytes) bad_weights("more than 64 MiB of tensor data");
    if (!out.emplace(name, dims).second) bad_weights("duplicate tensor " + name);
  }
  return out;
}

void check_model(const json& m, const std::map<std::string, std::vector<uint64_t>>& shapes) {
  const std::string w = "model.json";
  if (get_string(m, "format", w, 32) != "diode-model") throw VerifyError(w + ".format: expected \"diode-model\"");
  if (get_uint(m, "version", w) != 1) throw VerifyError(w + ".version: unsupported (expected 1)");
  const std::string hw = get_string(m, "hardware_key", w, 64);
  if (!is_valid_hardware_key(hw)) throw VerifyError(w + ".hardware_key: \"" + hw + "\" is not a valid hardware key");
  if (get_string(m, "target", w, 32) != "log_us") throw VerifyError(w + ".target: expected \"log_us\"");
  FeatureSpec spec;
  try {
    spec = FeatureSpec::from_json(field(m, "feature_spec", w));
  } catch (const WireError& e) {
    throw VerifyError(w + "." + e.what());
  }
  std::string family = "gemm";  // absent: gemm
  if (m.contains("family")) {
    family = get_string(m, "family", w, 64);
    const auto& fams = feature_families();
    if (std::find(fams.begin(), fams.end(), family) == fams.end())
      throw VerifyError(w + ".family: unknown decision family \"" + family + "\"");
  }
  if (family != spec.family)
    throw VerifyError(w + ".family: " + family + (m.contains("family") ? "" : " (absent)") +
                      " but the feature spec is of family " + spec.family);
  const json& a = field(m, "architecture", w);
  const std::string aw = w + ".architecture";
  if (get_string(a, "kind", aw, 32) != "residual_mlp") throw VerifyError(aw + ".kind: only residual_mlp is supported");
  const uint64_t d = get_uint(a, "input", aw, kMaxInput), h = get_uint(a, "hidden", aw, kMaxHidden),
                 blocks = get_uint(a, "blocks", aw, kMaxBlocks);
  const std::string act = get_string(a, "activation", aw, 16);
  if (act != "relu" && act != "silu") throw VerifyError(aw + ".activation: must be relu or silu");
  if (d != spec.size())
    throw VerifyError(aw + ".input: " + std::to_string(d) + " but the feature spec has " + std::to_string(spec.size()) + " features");
  // An ensemble (docs/model-format.md, Members): members > 1 with a cascade; a single model has neither.
  uint64_t members = 1;
  if (a.contains("members")) {
    members = get_uint(a, "members", aw, kMaxEnsembleMembers);
    if (members < 1) throw VerifyError(aw + ".members: must be at least 1");
  }
  if (members > 1) {
    if (!a.contains("cascade")) throw VerifyError(aw + ".cascade: required when members > 1");
    if (get_uint(a, "cascade", aw, kMaxCascade) < 1) throw VerifyError(aw + ".cascade: must be at least 1");
  } else if (a.contains("cascade")) {
    throw VerifyError(aw + ".cascade: only an ensemble (members > 1) has a cascade");
  }
  // An ensemble's pre-filter (docs/model-format.md, Pre-filter): exactly hidden, blocks, keep.
  uint64_t pf_hidden = 0, pf_blocks = 0;
  if (a.contains("prefilter")) {
    const std::string pw = aw + ".prefilter";
    if (members < 2) throw VerifyError(pw + ": only an ensemble (members > 1) has a pre-filter");
    const json& p = a["prefilter"];
    if (!p.is_object() || p.size() != 3) throw VerifyError(pw + ": expected an object of hidden, blocks and keep");
    pf_hidden = get_uint(p, "hidden", pw, kMaxHidden);
    pf_blocks = get_uint(p, "blocks", pw, kMaxBlocks);
    if (pf_hidden < 1) throw VerifyError(pw + ".hidden: must be at least 1");
    if (get_uint(p, "keep", pw, kMaxPrefilterKeep) < 1) throw VerifyError(pw + ".keep: must be at least 1");
  }
  const json& ds = field(m, "dataset", w);
  const std::string digest = get_string(ds, "sha256", w + ".dataset", 64);
  if (digest.size() != 64 || digest.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw VerifyError(w + ".dataset.sha256: not 64 lower-case hex characters");
  get_uint(ds, "records", w + ".dataset");
  if (!field(m, "metrics", w).is_object()) throw VerifyError(w + ".metrics: not an object");
  if (!field(m, "training", w).is_object()) throw VerifyError(w + ".training: not an object");
  auto expect = residual_mlp_tensors(d, h, blocks, members);
  if (pf_hidden > 0)
    for (auto& t : prefilter_tensors(d, pf_hidden, pf_blocks)) expect.push_back(std::move(t));
  if (shapes.size() != expect.size())
    throw VerifyError("weights.msgpack: " + std::to_string(shapes.size()) + " tensors, the architecture has " +
                      std::to_string(expect.size()));
  for (const auto& [name, shape] : expect) {
    auto it = shapes.find(name);
    if (it == shapes.end()) throw VerifyError("weights.msgpack: tensor " + name + " is missing");
    if (it->second != shape) throw VerifyError("weights.msgpack: tensor " + name + " has the wrong shape");
  }
}

std::string model_family(const json& model) {
  if (model.is_object() && model.contains("family") && model["family"].is_string())
    return model["family"].get<std::string>();
  return "gemm";
}

ModelDir read_model_dir(const std::string& dir) {
  ModelDir md;
  const auto p = std::filesystem::path(dir);
  md.model_bytes = io::read_file((p / "model.json").string(), kMaxMetadataBytes);
  md.weight_bytes = io::read_file((p / "weights.msgpack").string(), kMaxWeightBytes + (1u << 20));
  md.model = parse_untrusted_json(md.model_bytes, "model.json");
  check_model(md.model, check_weights(md.weight_bytes));
  return md;
}

void write_example_model(const std::string& dir, const std::string& hw, uint64_t hidden, uint64_t blocks,
                         const std::string& family) {
  static_assert(std::endian::native == std::endian::little, "weights are little-endian float32");
  const auto& fams = feature_families();
  if (std::find(fams.begin(), fams.end(), family) == fams.end())
    throw std::invalid_argument("unknown decision family \"" + family + "\"");
  FeatureSpec spec;
  spec.family = family;
  const uint64_t d = spec.size();
  // A fixed 64-bit LCG (Knuth's MMIX constants): the same weights on every run,
  // scaled like torch's default Linear init (uniform in +-1/sqrt(fan_in)).
  uint64_t state = 0x5eed5eed5eed5eedull;
  auto next = [&state]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / double(1ull << 53);
  };
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  const auto tensors = residual_mlp_tensors(d, hidden, blocks);
  pk.pack_array(3);
  pk.pack(std::string("diode-weights"));
  pk.pack(1u);
  pk.pack_array(static_cast<uint32_t>(tensors.size()));
  for (const auto& [name, shape] : tensors) {
    uint64_t count = 1;
    for (auto s : shape) count *= s;
    const double bound = 1.0 / std::sqrt(double(shape.size() == 2 ? shape[1] : hidden));
    std::string data(count * 4, '\0');
    for (uint64_t i = 0; i < count; ++i) {
      const float v = static_cast<float>((next() * 2.0 - 1.0) * bound);
      std::memcpy(data.data() + i * 4, &v, 4);
    }
    pk.pack_array(4);
    pk.pack(name);
    pk.pack(std::string("float32"));
    pk.pack(shape);
    pk.pack_bin(static_cast<uint32_t>(data.size()));
    pk.pack_bin_body(data.data(), static_cast<uint32_t>(data.size()));
  }
  json model = {{"format", "diode-model"},
                {"version", 1},
                {"hardware_key", hw},
                {"architecture", {{"kind", "residual_mlp"}, {"input", d}, {"hidden", hidden}, {"blocks", blocks},
                                  {"activation", "silu"}}},
                {"feature_spec", spec.to_json()},
                {"target", "log_us"},
                {"dataset", {{"sha256", to_hex(sha256("diode example dataset"))}, {"records", 0}, {"problems", 0},
                             {"hardware_key", hw}}},
                {"metrics", {{"note", "example model with random weights; its predictions are meaningless"}}},
                {"training", {{"seed", 0}, {"ranks", 0}, {"epochs", 0}, {"loss", "none"}, {"torch_version", ""}}}};
  if (family != "gemm") model["family"] = family;
  std::filesystem::create_directories(dir);
  io::write_file_atomic((std::filesystem::path(dir) / "model.json").string(), model.dump(2) + "\n");
  io::write_file_atomic((std::filesystem::path(dir) / "weights.msgpack").string(), std::string_view(buf.data(), buf.size()));
}

}  // namespace diode::bundle
