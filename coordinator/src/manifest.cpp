#include "manifest.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>

#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/json.h"
#include "diode/wire.h"
#include "diode/sha256.h"

namespace diode::fleet {

namespace {

// hardware.device_name is a regular expression that a requester writes and that
// the coordinator (REGISTER) and the hub (every new hardware fingerprint) match
// against device names that workers and contributors send. libstdc++'s default
// std::regex matcher backtracks, recursively: "(.*)*x" or ".*.*.*.*.*.*.*x" take
// exponential time against a 96-character device name (the fleet hangs), and
// counted repetition ("(?:){30000}", "(a?){15000}x") builds up to 100,000 states
// that take seconds to compile and to match. So a pattern is bounded (length, no
// {n,m}, no back-references) and compiled in libstdc++'s polynomial mode: its
// breadth-first matcher takes time linear in the pattern's states per character.
constexpr size_t kMaxDevicePatternLen = 128;
#if defined(__GLIBCXX__)
constexpr std::regex::flag_type kDevicePatternFlags =
    std::regex::ECMAScript | std::regex::icase | std::regex_constants::__polynomial;
#else
#error "device_name patterns rely on libstdc++'s polynomial-time std::regex mode (regex_constants::__polynomial)"
#endif

// The compiled pattern, or nullopt with the reason in `why`.
std::optional<std::regex> compile_device_pattern(const std::string& p, std::string* why) {
  auto fail = [&](std::string w) -> std::optional<std::regex> {
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  if (p.empty()) return fail("empty pattern");
  if (p.size() > kMaxDevicePatternLen)
    return fail("longer than " + std::to_string(kMaxDevicePatternLen) + " characters");
  if (p.find('{') != std::string::npos)
    return fail("'{' is not allowed: counted repetition ({n}, {n,m}) is not supported in device_name patterns");
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    if (p[i] != '\\') continue;
    if (p[i + 1] >= '1' && p[i + 1] <= '9')
      return fail("back-references (\\1 to \\9) are not supported in device_name patterns");
    ++i;  // an escaped character, '\\' included
  }
  try {
    return std::regex(p, kDevicePatternFlags);
  } catch (const std::regex_error& e) {
    return fail(std::string("invalid regular expression: ") + e.what());
  }
}

// The offset of the first byte that does not start a valid UTF-8 sequence (no overlong
// forms, no surrogates, at most U+10FFFF), or npos. Manifests are stored and shown as
// JSON (manifest_fields, the coordinator's store), whose serializer throws on invalid
// UTF-8: such bytes are refused here instead (found by tests/fuzz/fuzz_manifest).
size_t first_invalid_utf8(std::string_view s) {
  static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return i;
    }
    if (s.size() - i <= n) return i;
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

// `s` with every byte that is not valid UTF-8 written as \xNN (for error messages,
// which quote the manifest's keys and values).
std::string printable_utf8(std::string_view s) {
  std::string out;
  for (size_t bad; (bad = first_invalid_utf8(s)) != std::string_view::npos; s.remove_prefix(bad + 1)) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(s[bad])));
    out.append(s.substr(0, bad)).append(hex);
  }
  return out.append(s);
}

std::string join_errors(const std::vector<std::string>& errors) {
  std::string out;
  for (const auto& e : errors) out += (out.empty() ? "" : "\n") + e;
  return out;
}

// Collects errors with positions instead of stopping at the first one, so a
// requester fixes a manifest in one round.
class Checker {
 public:
  explicit Checker(std::string file) : file_(std::move(file)) {}

  void error(const YAML::Mark& mark, const std::string& field, const std::string& msg) {
    std::string where = file_;
    if (!mark.is_null()) where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    errors_.push_back(printable_utf8(where + ": " + field + ": " + msg));
  }
  // A node that is absent (n["missing"]) has no position: yaml-cpp throws from
  // Mark() and from every type query on such a node, so neither is asked.
  void error(const YAML::Node& n, const std::string& field, const std::string& msg) {
    error(n.IsDefined() ? n.Mark() : YAML::Mark::null_mark(), field, msg);
  }

  // A mapping whose keys are all in `allowed`; `required` keys must be present.
  bool mapping(const YAML::Node& n, const std::string& path, const std::set<std::string>& allowed,
               const std::set<std::string>& required = {}) {
    if (!n.IsMap()) {
      error(n, path, "expected a mapping");
      return false;
    }
    for (const auto& kv : n) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (!allowed.count(key)) error(kv.first, path.empty() ? key : path + "." + key, "unknown field");
    }
    for (const auto& r : required)
      if (!n[r]) error(n, path.empty() ? r : path + "." + r, "missing required field");
    return true;
  }

  bool scalar(const YAML::Node& n, const std::string& path, const char* want) {
    if (!n.IsDefined()) {
      error(n, path, "missing");
      return false;
    }
    if (n.IsScalar()) return true;
    error(n, path, std::string("expected ") + want);
    return false;
  }

  // A string of at most max_len characters. A longer one is an error, and only
  // its first max_len characters come back, so that no later check (a regular
  // expression among them) ever runs on an unbounded string.
  std::string str(const YAML::Node& n, const std::string& path, size_t max_len = 256) {
    if (!scalar(n, path, "a string")) return {};
    if (n.Scalar().size() > max_len) {
      error(n, path, "longer than " + std::to_string(max_len) + " characters");
      return n.Scalar().substr(0, max_len);
    }
    // The whole text is checked before parsing; this is for what escapes in quoted
    // scalars make (yaml-cpp refuses escaped surrogates today).
    if (first_invalid_utf8(n.Scalar()) != std::string_view::npos) {
      error(n, path, "not valid UTF-8");
      return {};
    }
    return n.Scalar();
  }

  uint64_t uint(const YAML::Node& n, const std::string& path, uint64_t lo, uint64_t hi) {
    if (!scalar(n, path, "an integer")) return lo;
    const std::string& s = n.Scalar();
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) {
      error(n, path, "expected a non-negative integer, got '" + s + "'");
      return lo;
    }
    if (v < lo || v > hi) {
      error(n, path, s + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return lo;
    }
    return v;
  }

  int64_t sint(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi) {
    if (!scalar(n, path, "an integer")) return lo;
    const std::string& s = n.Scalar();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) {
      error(n, path, "expected an integer, got '" + s + "'");
      return lo;
    }
    if (v < lo || v > hi) {
      error(n, path, s + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return lo;
    }
    return v;
  }

  double real(const YAML::Node& n, const std::string& path, double lo, double hi) {
    if (!scalar(n, path, "a number")) return lo;
    const std::string& s = n.Scalar();
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) {
      error(n, path, "expected a finite number, got '" + s + "'");
      return lo;
    }
    if (v < lo || v > hi) {
      error(n, path, s + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return lo;
    }
    return v;
  }

  bool boolean(const YAML::Node& n, const std::string& path) {
    if (!scalar(n, path, "true or false")) return false;
    if (n.Scalar() == "true") return true;
    if (n.Scalar() == "false") return false;
    error(n, path, "expected true or false, got '" + n.Scalar() + "'");
    return false;
  }

  bool sequence(const YAML::Node& n, const std::string& path, size_t min_len, size_t max_len) {
    if (!n.IsSequence()) {
      error(n, path, "expected a list");
      return false;
    }
    if (n.size() < min_len || n.size() > max_len) {
      error(n, path, "expected " + std::to_string(min_len) + ".." + std::to_string(max_len) + " entries, got " +
                         std::to_string(n.size()));
      return false;
    }
    return true;
  }

  std::vector<std::string> enum_list(const YAML::Node& n, const std::string& path,
                                     const std::set<std::string>& allowed) {
    std::vector<std::string> out;
    if (!sequence(n, path, 1, allowed.size())) return out;
    std::set<std::string> seen;
    for (size_t i = 0; i < n.size(); ++i) {
      std::string p = path + "[" + std::to_string(i) + "]";
      std::string v = str(n[i], p);
      if (!allowed.count(v)) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        error(n[i], p, "'" + v + "' is not one of " + list);
      } else if (!seen.insert(v).second) {
        error(n[i], p, "duplicate '" + v + "'");
      } else {
        out.push_back(v);
      }
    }
    return out;
  }

  std::vector<uint64_t> dims(const YAML::Node& n, const std::string& path, uint64_t lo, uint64_t hi) {
    std::vector<uint64_t> out;
    if (!sequence(n, path, 1, 4096)) return out;
    for (size_t i = 0; i < n.size(); ++i) out.push_back(uint(n[i], path + "[" + std::to_string(i) + "]", lo, hi));
    return out;
  }

  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::string file_;
  std::vector<std::string> errors_;
};

// Finds mapping keys that appear twice. yaml-cpp keeps both pairs and `n[key]`
// answers the first, so `priority: 1` followed by `priority: 1000` would
// silently mean 1: a manifest that does not say one thing is refused instead.
// Runs on the parser's event stream, not on the node tree: aliases stay single
// events there, so an alias bomb cannot make this walk explode.
class DuplicateKeyFinder : public YAML::EventHandler {
 public:
  explicit DuplicateKeyFinder(Checker& c) : c_(c) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark, "~", true); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark, {}, false); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string& value) override {
    node(mark, value, true);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    std::string path = child_path();
    node(mark, {}, false);
    push(false, std::move(path));
  }
  void OnSequenceEnd() override { stack_.pop_back(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    std::string path = child_path();
    node(mark, {}, false);
    push(true, std::move(path));
  }
  void OnMapEnd() override { stack_.pop_back(); }

 private:
  struct Frame {
    bool is_map = false;
    std::string path;
    size_t index = 0;         // sequence: next element; map: events seen (even = key)
    std::string current_key;  // map: the key whose value comes next
    std::map<std::string, YAML::Mark> keys;
  };

  void push(bool is_map, std::string path) {
    Frame f;
    f.is_map = is_map;
    f.path = std::move(path);
    stack_.push_back(std::move(f));
  }

  // The dotted path of the node that starts now, for error messages.
  std::string child_path() const {
    if (stack_.empty()) return {};
    const Frame& f = stack_.back();
    if (!f.is_map) return f.path + "[" + std::to_string(f.index) + "]";
    if (f.index % 2 == 0) return f.path + (f.path.empty() ? "" : ".") + "?";  // a complex key
    return f.path.empty() ? f.current_key : f.path + "." + f.current_key;
  }

  // Every node start (scalar, alias, null, collection) passes here once, at the
  // level it belongs to. Only scalar keys can be compared; complex keys are
  // refused by the schema anyway.
  void node(const YAML::Mark& mark, const std::string& scalar, bool is_scalar) {
    if (stack_.empty()) return;
    Frame& f = stack_.back();
    if (!f.is_map) {
      ++f.index;
      return;
    }
    if (f.index++ % 2 != 0) return;  // a value
    f.current_key = is_scalar ? scalar : "?";
    if (!is_scalar) return;
    auto [it, fresh] = f.keys.emplace(scalar, mark);
    if (!fresh) {
      std::string field = f.path.empty() ? scalar : f.path + "." + scalar;
      c_.error(mark, field,
               "duplicate key (first at line " + std::to_string(it->second.line + 1) + ", column " +
                   std::to_string(it->second.column + 1) + ")");
    }
  }

  Checker& c_;
  std::vector<Frame> stack_;
};

// Where a second YAML document starts; nothing else.
struct SecondDocument : YAML::EventHandler {
  YAML::Mark mark = YAML::Mark::null_mark();
  void OnDocumentStart(const YAML::Mark& m) override { mark = m; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

void parse_hardware(Checker& c, const YAML::Node& n, HardwareMatch& hw) {
  if (!c.mapping(n, "hardware", {"vendor", "device_name", "compute_capability", "min_memory_gib", "key"},
                 {"device_name"}))
    return;
  if (n["vendor"]) {
    hw.vendor = c.str(n["vendor"], "hardware.vendor");
    if (hw.vendor != "nvidia" && hw.vendor != "amd" && hw.vendor != "cpu")
      c.error(n["vendor"], "hardware.vendor", "'" + hw.vendor + "' is not one of amd, cpu, nvidia");
  }
  if (const auto& dn = n["device_name"]) {  // missing: reported by mapping() above
    hw.device_pattern = c.str(dn, "hardware.device_name", kMaxDevicePatternLen);
    std::string why;
    // A pattern that is too long is already reported, and is not compiled.
    if (dn.IsScalar() && dn.Scalar().size() <= kMaxDevicePatternLen &&
        !compile_device_pattern(hw.device_pattern, &why))
      c.error(dn, "hardware.device_name", why);
  }
  if (const auto& cc = n["compute_capability"]) {
    if (cc.IsScalar()) {
      hw.compute_capabilities.push_back(c.str(cc, "hardware.compute_capability", 16));
    } else if (c.sequence(cc, "hardware.compute_capability", 1, 32)) {
      for (size_t i = 0; i < cc.size(); ++i)
        hw.compute_capabilities.push_back(c.str(cc[i], "hardware.compute_capability[" + std::to_string(i) + "]", 16));
    }
    static const std::regex cc_re("[0-9]+\\.[0-9]+|gfx[0-9a-f]+");
    for (const auto& v : hw.compute_capabilities)
      if (!std::regex_match(v, cc_re)) c.error(cc, "hardware.compute_capability", "'" + v + "' is not like 9.0");
  }
  if (n["min_memory_gib"])
    hw.min_memory_bytes = static_cast<uint64_t>(c.real(n["min_memory_gib"], "hardware.min_memory_gib", 0, 1 << 20) *
                                                static_cast<double>(1ull << 30));
  if (n["key"]) {
    hw.key = c.str(n["key"], "hardware.key", 128);
    if (!is_valid_hardware_key(hw.key))
      c.error(n["key"], "hardware.key",
              "'" + hw.key + "' is not a hardware key (like nvidia-h100-80gb: `diode hardware key` prints a GPU's)");
    else if (!hw.vendor.empty() && hw.key.rfind(hw.vendor + "-", 0) != 0)
      c.error(n["key"], "hardware.key", "'" + hw.key + "' does not start with the vendor '" + hw.vendor + "-'");
  }
}

void parse_lognormal(Checker& c, const YAML::Node& n, const std::string& path, LogNormal& ln) {
  if (!c.mapping(n, path, {"mean", "std"}, {"mean", "std"})) return;
  if (n["mean"]) ln.mean = c.real(n["mean"], path + ".mean", 0.0, 25.0);
  if (n["std"]) ln.std = c.real(n["std"], path + ".std", 0.0, 10.0);
}

// What a `distribution: problems` entry takes from the sweep around it.
struct EntryContext {
  std::string out_dtype = "bfloat16";  // sweep.out_dtype: the dtype_out of scaled_mm entries
};

// One entry of `distribution: problems`: {op, dtype, m, n, k, batch?, trans_a?, trans_b?,
// bias?, scale?}. The op, dtype and scale must be among sweep.ops/dtypes/scales (checked in
// parse_sweep); the problem itself is checked by the wire format's own rules
// (wire::validate). A scaled_mm entry has dtype_a = dtype_b = dtype and dtype_out =
// sweep.out_dtype, trans_b true and scale tensor unless it says otherwise, and N, K
// multiples of 16 (kScaledMmDimMultiple; torch._scaled_mm leaves M free).
Problem parse_problem_entry(Checker& c, const YAML::Node& n, const std::string& path, const EntryContext& ctx) {
  Problem p;
  if (!c.mapping(n, path, {"op", "dtype", "batch", "m", "n", "k", "trans_a", "trans_b", "bias", "scale"},
                 {"op", "dtype", "m", "n", "k"}))
    return p;
  for (const char* key : {"op", "dtype", "m", "n", "k"})
    if (!n[key]) return p;  // reported by mapping() above
  constexpr uint64_t kMaxDim = 1ull << 31;
  p.op = c.str(n["op"], path + ".op", 16);
  const bool scaled = family_of(p.op) == "scaled_mm";
  p.dtype_a = p.dtype_b = p.dtype_out = c.str(n["dtype"], path + ".dtype", 16);
  if (scaled) p.dtype_out = ctx.out_dtype;
  p.batch = n["batch"] ? c.uint(n["batch"], path + ".batch", 1, 1 << 20) : 1;
  const size_t errors_before = c.errors().size();
  p.m = c.uint(n["m"], path + ".m", 1, kMaxDim);
  p.n = c.uint(n["n"], path + ".n", 1, kMaxDim);
  p.k = c.uint(n["k"], path + ".k", 1, kMaxDim);
  if (scaled && c.errors().size() == errors_before) {
    p.trans_b = true;
    for (auto [key, v] : {std::pair{"n", p.n}, {"k", p.k}})
      if (v % kScaledMmDimMultiple != 0)
        c.error(n[key], path + "." + key,
                std::to_string(v) + " is not a multiple of " + std::to_string(kScaledMmDimMultiple) +
                    " (torch._scaled_mm needs K and N multiples of 16)");
  }
  if (n["trans_a"]) p.trans_a = c.boolean(n["trans_a"], path + ".trans_a");
  if (n["trans_b"]) p.trans_b = c.boolean(n["trans_b"], path + ".trans_b");
  p.bias = n["bias"] ? c.str(n["bias"], path + ".bias", 16) : (p.op == "addmm" || p.op == "baddbmm" ? "row" : "none");
  p.scale = n["scale"] ? c.str(n["scale"], path + ".scale", 16) : (scaled ? "tensor" : "none");
  try {
    wire::validate(p, path);
  } catch (const std::exception& e) {
    c.error(n, path, e.what());
  }
  return p;
}

void parse_shapes(Checker& c, const YAML::Node& n, ShapeSpec& s, const EntryContext& ctx) {
  const std::string path = "sweep.shapes";
  if (!c.mapping(n, path, {"distribution", "m", "n", "k", "round_to", "min", "max", "shapes", "batch", "list"},
                 {"distribution"}))
    return;
  if (!n["distribution"]) return;  // reported by mapping() above
  std::string dist = c.str(n["distribution"], path + ".distribution");
  constexpr uint64_t kMaxDim = 1ull << 31;
  if (n["batch"]) s.batches = c.dims(n["batch"], path + ".batch", 1, 1 << 20);
  auto forbid = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (n[k]) c.error(n[k], path + "." + k, "not allowed with distribution " + dist);
  };
  if (dist != "problems") forbid({"list"});
  if (dist == "lognormal") {
    s.kind = ShapeSpec::Kind::lognormal;
    forbid({"shapes"});
    if (n["m"]) parse_lognormal(c, n["m"], path + ".m", s.m);
    if (n["n"]) parse_lognormal(c, n["n"], path + ".n", s.n);
    if (n["k"]) parse_lognormal(c, n["k"], path + ".k", s.k);
    if (n["round_to"]) s.round_to = c.uint(n["round_to"], path + ".round_to", 1, 4096);
    if (n["min"]) s.min_dim = c.uint(n["min"], path + ".min", 1, kMaxDim);
    if (n["max"]) s.max_dim = c.uint(n["max"], path + ".max", 1, kMaxDim);
    if (s.min_dim > s.max_dim) c.error(n, path, "min is larger than max");
    if (s.round_to > s.max_dim) c.error(n, path + ".round_to", "larger than max");
  } else if (dist == "explicit") {
    s.kind = ShapeSpec::Kind::explicit_set;
    forbid({"m", "n", "k", "round_to", "min", "max"});
    const auto& list = n["shapes"];
    if (!list) {
      c.error(n, path + ".shapes", "missing required field (a list of [M, N, K])");
    } else if (c.sequence(list, path + ".shapes", 1, 65536)) {
      for (size_t i = 0; i < list.size(); ++i) {
        std::string p = path + ".shapes[" + std::to_string(i) + "]";
        if (!list[i].IsSequence() || list[i].size() != 3) {
          c.error(list[i], p, "expected [M, N, K]");
          continue;
        }
        s.shapes.push_back({c.uint(list[i][0], p + "[0]", 1, kMaxDim), c.uint(list[i][1], p + "[1]", 1, kMaxDim),
                            c.uint(list[i][2], p + "[2]", 1, kMaxDim)});
      }
    }
  } else if (dist == "grid") {
    s.kind = ShapeSpec::Kind::grid;
    forbid({"shapes", "round_to", "min", "max"});
    for (const char* d : {"m", "n", "k"})
      if (!n[d]) c.error(n, path + "." + d, "missing required field (a list of sizes)");
    if (n["m"]) s.grid_m = c.dims(n["m"], path + ".m", 1, kMaxDim);
    if (n["n"]) s.grid_n = c.dims(n["n"], path + ".n", 1, kMaxDim);
    if (n["k"]) s.grid_k = c.dims(n["k"], path + ".k", 1, kMaxDim);
  } else if (dist == "problems") {
    s.kind = ShapeSpec::Kind::problem_list;
    forbid({"shapes", "m", "n", "k", "round_to", "min", "max", "batch"});
    const auto& list = n["list"];
    if (!list) {
      c.error(n, path + ".list", "missing required field (a list of problems)");
    } else if (c.sequence(list, path + ".list", 1, 65536)) {
      for (size_t i = 0; i < list.size(); ++i)
        s.problems.push_back(parse_problem_entry(c, list[i], path + ".list[" + std::to_string(i) + "]", ctx));
    }
  } else {
    c.error(n["distribution"], path + ".distribution",
            "'" + dist + "' is not one of lognormal, explicit, grid, problems");
  }
}

void parse_timing(Checker& c, const YAML::Node& n, TimingSettings& t) {
  const std::string p = "sweep.timing";
  if (!c.mapping(n, p, {"warmup", "repeats", "min_repeats", "l2_flush", "config_timeout_s", "compile_timeout_s",
                        "budget_ms_per_config", "problem_timeout_s", "static_top"}))
    return;
  if (n["warmup"]) t.warmup = c.sint(n["warmup"], p + ".warmup", 0, 1000);
  if (n["repeats"]) t.repeats = c.sint(n["repeats"], p + ".repeats", 1, 10000);
  if (n["min_repeats"]) t.min_repeats = c.sint(n["min_repeats"], p + ".min_repeats", 1, 10000);
  if (t.min_repeats > t.repeats) c.error(n, p + ".min_repeats", "larger than repeats");
  if (n["l2_flush"]) t.l2_flush = c.boolean(n["l2_flush"], p + ".l2_flush");
  if (n["config_timeout_s"]) t.config_timeout_s = c.real(n["config_timeout_s"], p + ".config_timeout_s", 1e-3, 3600);
  if (n["compile_timeout_s"]) t.compile_timeout_s = c.sint(n["compile_timeout_s"], p + ".compile_timeout_s", 1, 86400);
  if (n["budget_ms_per_config"])
    t.budget_ms_per_config = c.real(n["budget_ms_per_config"], p + ".budget_ms_per_config", 1e-3, 3.6e6);
  if (n["problem_timeout_s"])
    t.problem_timeout_s = c.real(n["problem_timeout_s"], p + ".problem_timeout_s", 1e-3, 604800);
  if (n["static_top"]) t.static_top = c.sint(n["static_top"], p + ".static_top", 0, 100);
}

// The ops of `family` among `ops`, comma-separated (for error messages).
std::string ops_of_family(const std::vector<std::string>& ops, std::string_view family) {
  std::string out;
  for (const auto& op : ops)
    if (family_of(op) == family) out += (out.empty() ? "" : ", ") + op;
  return out;
}

// sweep.ops, sweep.dtypes, sweep.scales and sweep.out_dtype: one decision family per
// manifest, with the operand dtypes and keys of that family.
void parse_family(Checker& c, const YAML::Node& n, Manifest& m) {
  const std::string p = "sweep";
  const size_t errors_before = c.errors().size();
  if (n["ops"]) m.ops = c.enum_list(n["ops"], p + ".ops", {"mm", "addmm", "bmm", "baddbmm", "scaled_mm"});
  if (n["dtypes"])
    m.dtypes = c.enum_list(n["dtypes"], p + ".dtypes", {"float16", "bfloat16", "float32", "float8_e4m3fn"});
  std::set<std::string> families;
  for (const auto& op : m.ops) families.insert(std::string(family_of(op)));
  if (families.size() > 1) {
    c.error(n["ops"], p + ".ops",
            "mixes the decision families gemm (" + ops_of_family(m.ops, "gemm") + ") and scaled_mm (" +
                ops_of_family(m.ops, "scaled_mm") + "): a manifest requests one family; split it into two manifests");
  } else if (families.size() == 1) {
    m.family = *families.begin();
    const bool scaled = m.family == "scaled_mm";
    const YAML::Node& d = n["dtypes"];
    for (size_t i = 0; d && d.IsSequence() && i < d.size(); ++i) {
      if (!d[i].IsScalar()) continue;  // reported by enum_list
      const std::string& v = d[i].Scalar();
      const std::string at = p + ".dtypes[" + std::to_string(i) + "]";
      // Values outside the dtype enum are reported by enum_list.
      if (scaled && (v == "float16" || v == "bfloat16" || v == "float32"))
        c.error(d[i], at, "'" + v + "' is not an operand dtype of scaled_mm (float8_e4m3fn; the output dtype is sweep.out_dtype)");
      if (!scaled && v == "float8_e4m3fn")
        c.error(d[i], at, "'float8_e4m3fn' is an operand dtype of op scaled_mm only (" + ops_of_family(m.ops, "gemm") +
                              " take float16, bfloat16, float32)");
    }
  }
  const bool has_scaled = std::find(m.ops.begin(), m.ops.end(), "scaled_mm") != m.ops.end();
  if (const auto& sc = n["scales"]) {
    if (!has_scaled) c.error(sc, p + ".scales", "only for op scaled_mm (sweep.ops has no scaled_mm)");
    else m.scales = c.enum_list(sc, p + ".scales", {"tensor", "row"});
  } else if (has_scaled) {
    m.scales = {"tensor"};
  }
  if (const auto& od = n["out_dtype"]) {
    if (!has_scaled) {
      c.error(od, p + ".out_dtype", "only for op scaled_mm (sweep.ops has no scaled_mm)");
    } else {
      // The one output dtype the collector measures scaled_mm with
      // (python/torch_diode/collect/spec.py, SCALED_MM_FORM): a shard of another would fail.
      m.out_dtype = c.str(od, p + ".out_dtype", 16);
      if (m.out_dtype != "bfloat16")
        c.error(od, p + ".out_dtype",
                "'" + m.out_dtype + "' is not collected: scaled_mm is measured with out_dtype bfloat16 only");
    }
  }
  // The problems this family expands to must pass the wire format's rules (the agent
  // and the hub refuse anything else): checked once here, per scale, on a 16x16x16 problem.
  if (m.family == "scaled_mm" && c.errors().size() == errors_before) {
    for (const auto& scale : m.scales) {
      Problem pr;
      pr.op = "scaled_mm";
      pr.m = pr.n = pr.k = kScaledMmDimMultiple;
      pr.dtype_a = pr.dtype_b = "float8_e4m3fn";
      pr.dtype_out = m.out_dtype;
      pr.trans_b = true;
      pr.scale = scale;
      try {
        wire::validate(pr, "problem");
      } catch (const std::exception& e) {
        c.error(n["out_dtype"] ? n["out_dtype"] : n["scales"] ? n["scales"] : n["ops"], p,
                std::string("the sweep's problems break the wire format's rules: ") + e.what());
        break;
      }
    }
  }
}

void parse_sweep(Checker& c, const YAML::Node& n, Manifest& m) {
  const std::string p = "sweep";
  if (!c.mapping(n, p,
                 {"ops", "dtypes", "scales", "out_dtype", "shapes", "problems", "seed", "search_space", "timing",
                  "tf32", "smem_prefilter", "problems_per_shard"},
                 {"ops", "dtypes", "shapes", "problems", "seed", "problems_per_shard"}))
    return;
  parse_family(c, n, m);
  if (n["problems"]) m.problems = c.uint(n["problems"], p + ".problems", 1, 10'000'000);
  if (n["seed"]) m.seed = c.uint(n["seed"], p + ".seed", 0, UINT64_MAX);
  if (n["problems_per_shard"]) m.problems_per_shard = c.uint(n["problems_per_shard"], p + ".problems_per_shard", 1, 65536);
  if (n["search_space"]) {
    m.search_space = c.str(n["search_space"], p + ".search_space");
    // Any case, as install(search_space=...) takes it; stored as Inductor spells it.
    for (auto& ch : m.search_space) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (m.search_space != "EXHAUSTIVE" && m.search_space != "DEFAULT")
      c.error(n["search_space"], p + ".search_space", "'" + m.search_space + "' is not one of EXHAUSTIVE, DEFAULT");
  }
  if (n["timing"]) parse_timing(c, n["timing"], m.timing);
  if (const auto& t = n["tf32"]) {
    m.tf32.clear();
    if (c.sequence(t, p + ".tf32", 1, 2))
      for (size_t i = 0; i < t.size(); ++i) m.tf32.push_back(c.boolean(t[i], p + ".tf32[" + std::to_string(i) + "]"));
    if (m.tf32.size() == 2 && m.tf32[0] == m.tf32[1]) c.error(t, p + ".tf32", "duplicate value");
  }
  if (n["smem_prefilter"]) m.smem_prefilter = c.boolean(n["smem_prefilter"], p + ".smem_prefilter");
  if (n["shapes"]) parse_shapes(c, n["shapes"], m.shapes, EntryContext{m.out_dtype});
  if (m.shapes.kind == ShapeSpec::Kind::problem_list) {
    const std::set<std::string> ops(m.ops.begin(), m.ops.end()), dtypes(m.dtypes.begin(), m.dtypes.end()),
        scales(m.scales.begin(), m.scales.end());
    for (size_t i = 0; i < m.shapes.problems.size(); ++i) {
      const Problem& pr = m.shapes.problems[i];
      std::string at = p + ".shapes.list[" + std::to_string(i) + "]";
      if (!ops.count(pr.op)) c.error(n["shapes"]["list"][i], at + ".op", "'" + pr.op + "' is not in sweep.ops");
      if (!dtypes.count(pr.dtype_a))
        c.error(n["shapes"]["list"][i], at + ".dtype", "'" + pr.dtype_a + "' is not in sweep.dtypes");
      if (family_of(pr.op) == "scaled_mm" && ops.count(pr.op) && !scales.count(pr.scale))
        c.error(n["shapes"]["list"][i], at + ".scale", "'" + pr.scale + "' is not in sweep.scales");
    }
    if (m.problems > m.shapes.problems.size())
      c.error(n["problems"], p + ".problems",
              "larger than the " + std::to_string(m.shapes.problems.size()) + " problems listed in sweep.shapes.list");
  }
}

}  // namespace

ManifestError::ManifestError(std::vector<std::string> errors)
    : std::runtime_error(join_errors(errors)), errors_(std::move(errors)) {}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  if (const size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    const size_t nl = bad == 0 ? std::string::npos : text.rfind('\n', bad - 1);
    const size_t column = bad - (nl == std::string::npos ? 0 : nl + 1) + 1;
    const auto line = std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n') + 1;
    throw ManifestError({printable_utf8(path) + ":" + std::to_string(line) + ":" + std::to_string(column) +
                         ": (yaml): not valid UTF-8 (a manifest is UTF-8 text)"});
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ManifestError({path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                         ": (yaml): " + e.msg});
  }
  Checker c(path);
  {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DuplicateKeyFinder dups(c);
    // The manifest is the first document (all that YAML::Load reads); a second one is
    // refused rather than ignored. No loop over documents: yaml-cpp 0.7 never gets past
    // a stray ',' at document level, and HandleNextDocument returns an empty document
    // for it forever (found by tests/fuzz/fuzz_manifest: the input "," hung the parser).
    SecondDocument second;
    try {
      if (parser.HandleNextDocument(dups) && parser.HandleNextDocument(second))
        c.error(second.mark, "(yaml)", "more than one YAML document (a manifest is one document)");
    } catch (const YAML::Exception&) {
      // YAML::Load above parsed the same text; nothing new to report.
    }
  }
  Manifest m;
  m.path = path;
  m.content_sha256 = to_hex(sha256(text));
  m.source = text;
  if (c.mapping(root, "", {"version", "name", "sweep_id", "requester", "priority", "scheduled", "max_attempts",
                           "hardware", "sweep"},
                {"version", "name", "requester", "hardware", "sweep"})) {
    if (root["version"]) c.uint(root["version"], "version", 1, 1);
    static const std::regex name_re("[a-z0-9][a-z0-9.-]{0,63}");
    static const std::regex sweep_re("[A-Za-z0-9._:-]{1,64}");
    if (root["name"]) {
      m.name = c.str(root["name"], "name", 64);
      if (!std::regex_match(m.name, name_re)) c.error(root["name"], "name", "must match [a-z0-9][a-z0-9.-]{0,63}");
    }
    m.sweep_id = m.name;
    if (root["sweep_id"]) {
      m.sweep_id = c.str(root["sweep_id"], "sweep_id", 64);
      if (!std::regex_match(m.sweep_id, sweep_re)) c.error(root["sweep_id"], "sweep_id", "must match [A-Za-z0-9._:-]{1,64}");
    }
    if (root["requester"]) {
      m.requester = c.str(root["requester"], "requester", 128);
      if (m.requester.empty()) c.error(root["requester"], "requester", "empty");
    }
    if (root["priority"]) m.priority = c.sint(root["priority"], "priority", -1000, 1000);
    if (root["scheduled"]) m.scheduled = c.boolean(root["scheduled"], "scheduled");
    if (root["max_attempts"]) m.max_attempts = c.sint(root["max_attempts"], "max_attempts", 1, 100);
    if (root["hardware"]) parse_hardware(c, root["hardware"], m.hardware);
    if (root["sweep"]) parse_sweep(c, root["sweep"], m);
    // Bounded by what the coordinator loads in about a second (kMaxManifestShards).
    if (c.errors().empty() && m.shard_count() > kMaxManifestShards)
      c.error(root["sweep"], "sweep",
              std::to_string(m.shard_count()) + " shards (sweep.problems / sweep.problems_per_shard) is more than the "
              "limit of " + std::to_string(kMaxManifestShards) + " shards per manifest (what the coordinator loads "
              "in about a second); split the sweep into several manifests");
    if (c.errors().empty() && m.problems > kMaxManifestProblems)
      c.error(root["sweep"]["problems"], "sweep.problems",
              std::to_string(m.problems) + " problems is more than the limit of " +
                  std::to_string(kMaxManifestProblems) + " problems per manifest (what the coordinator loads in "
                  "about a second); split the sweep into several manifests");
  }
  if (!c.errors().empty()) throw ManifestError(c.errors());
  return m;
}

Manifest load_manifest(const std::string& path) {
  std::string text;
  try {
    text = io::read_file(path, 16u << 20);
  } catch (const std::exception& e) {
    throw ManifestError({path + ": " + e.what()});
  }
  return parse_manifest(text, path);
}

bool hardware_matches(const HardwareMatch& m, const HardwareId& h) {
  if (!m.vendor.empty() && m.vendor != h.vendor) return false;
  if (h.memory_bytes < m.min_memory_bytes) return false;
  if (!m.key.empty() && hardware_key(h) != m.key) return false;
  if (!m.compute_capabilities.empty()) {
    bool any = false;
    for (const auto& cc : m.compute_capabilities) any = any || cc == h.compute_capability || cc == h.arch;
    if (!any) return false;
  }
  // Validated at load; a pattern that is not (from an older store) never matches.
  const auto re = compile_device_pattern(m.device_pattern, nullptr);
  return re && std::regex_search(h.device_name, *re);
}

namespace {

std::string gib_text(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(bytes) / double(1ull << 30));
  return buf;
}

}  // namespace

std::string hardware_rules_text(const HardwareMatch& m) {
  std::string out;
  if (!m.vendor.empty()) out += "vendor=" + m.vendor + " ";
  out += "device_name=" + m.device_pattern;
  if (!m.compute_capabilities.empty()) {
    out += " cc=";
    for (size_t i = 0; i < m.compute_capabilities.size(); ++i) out += (i ? "|" : "") + m.compute_capabilities[i];
  }
  if (m.min_memory_bytes > 0) out += " min_memory_gib=" + gib_text(m.min_memory_bytes);
  if (!m.key.empty()) out += " key=" + m.key;
  return out;
}

std::optional<std::string> resolve_hardware_key(const HardwareMatch& m, std::string* why) {
  auto fail = [&](std::string w) -> std::optional<std::string> {
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  // An explicit key is the answer: matching requires a GPU of exactly that key.
  if (!m.key.empty()) return m.key;
  if (m.vendor.empty()) return fail("no hardware.vendor (any vendor matches)");
  std::string name = m.device_pattern;
  // "^NAME$" names a device as much as "NAME" does.
  if (!name.empty() && name.front() == '^') name.erase(0, 1);
  if (!name.empty() && name.back() == '$') name.pop_back();
  static const std::regex literal("[A-Za-z0-9 _-]+");
  if (!std::regex_match(name, literal))
    return fail("hardware.device_name '" + m.device_pattern + "' is a regular expression, not one device name");
  if (m.min_memory_bytes == 0 && m.vendor != "cpu")
    return fail("no hardware.min_memory_gib (the memory size is part of the key)");
  HardwareId h;
  h.vendor = m.vendor;
  // Drivers name devices with the vendor first ("NVIDIA H100 80GB HBM3").
  h.device_name = name;
  h.memory_bytes = m.min_memory_bytes;
  std::string key = hardware_key(h);
  if (!is_valid_hardware_key(key)) return fail("the rules give no valid key ('" + key + "')");
  return key;
}

namespace {
// The YAML spelling of a distribution (parse_shapes reads these).
const char* distribution_name(ShapeSpec::Kind k) {
  switch (k) {
    case ShapeSpec::Kind::lognormal: return "lognormal";
    case ShapeSpec::Kind::explicit_set: return "explicit";
    case ShapeSpec::Kind::grid: return "grid";
    case ShapeSpec::Kind::problem_list: return "problems";
  }
  return "?";
}
}  // namespace

nlohmann::json manifest_fields(const Manifest& m) {
  const auto& s = m.shapes;
  nlohmann::json listed = nlohmann::json::array();
  for (const auto& p : s.problems) listed.push_back(to_json(p));
  nlohmann::json f = {{"name", m.name},
                      {"sweep_id", m.sweep_id},
                      {"requester", m.requester},
                      {"priority", m.priority},
                      {"scheduled", m.scheduled},
                      {"max_attempts", m.max_attempts},
                      {"hardware.vendor", m.hardware.vendor},
                      {"hardware.device_name", m.hardware.device_pattern},
                      {"hardware.compute_capability", m.hardware.compute_capabilities},
                      {"hardware.min_memory_bytes", m.hardware.min_memory_bytes},
                      {"hardware.key", m.hardware.key},
                      {"sweep.ops", m.ops},
                      {"sweep.dtypes", m.dtypes},
                      {"sweep.problems", m.problems},
                      {"sweep.problems_per_shard", m.problems_per_shard},
                      {"sweep.seed", m.seed},
                      {"sweep.search_space", m.search_space},
                      {"sweep.timing.warmup", m.timing.warmup},
                      {"sweep.timing.repeats", m.timing.repeats},
                      {"sweep.timing.min_repeats", m.timing.min_repeats},
                      {"sweep.timing.l2_flush", m.timing.l2_flush},
                      {"sweep.timing.config_timeout_s", m.timing.config_timeout_s},
                      {"sweep.timing.compile_timeout_s", m.timing.compile_timeout_s},
                      {"sweep.timing.budget_ms_per_config", m.timing.budget_ms_per_config},
                      {"sweep.timing.problem_timeout_s", m.timing.problem_timeout_s},
                      {"sweep.timing.static_top", m.timing.static_top},
                      {"sweep.tf32", m.tf32},
                      {"sweep.smem_prefilter", m.smem_prefilter},
                      {"sweep.shapes.distribution", distribution_name(s.kind)},
                      {"sweep.shapes.m", {s.m.mean, s.m.std}},
                      {"sweep.shapes.n", {s.n.mean, s.n.std}},
                      {"sweep.shapes.k", {s.k.mean, s.k.std}},
                      {"sweep.shapes.round_to", s.round_to},
                      {"sweep.shapes.min", s.min_dim},
                      {"sweep.shapes.max", s.max_dim},
                      {"sweep.shapes.shapes", s.shapes},
                      {"sweep.shapes.grid", {s.grid_m, s.grid_n, s.grid_k}},
                      {"sweep.shapes.batch", s.batches}};
  // Only for `distribution: problems`: other manifests keep the fields stored before it existed.
  if (!listed.empty()) f["sweep.shapes.list"] = std::move(listed);
  // Only for the scaled_mm family: GEMM manifests keep the fields stored before it existed.
  if (m.family == "scaled_mm") {
    f["sweep.scales"] = m.scales;
    f["sweep.out_dtype"] = m.out_dtype;
  }
  return f;
}

std::string describe_manifest_change(const nlohmann::json& before, const nlohmann::json& after) {
  std::string out;
  auto shorten = [](std::string v) { return v.size() > 60 ? v.substr(0, 57) + "..." : v; };
  for (auto it = after.begin(); it != after.end(); ++it) {
    nlohmann::json old = before.contains(it.key()) ? before.at(it.key()) : nlohmann::json();
    if (old == it.value()) continue;
    out += (out.empty() ? "" : ", ") + it.key() + " " + shorten(old.dump()) + " -> " + shorten(it.value().dump());
  }
  return out;
}

}  // namespace diode::fleet
