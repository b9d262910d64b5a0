// Manifest schema errors carry positions; expansion is deterministic and
// follows the documented distribution.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "diode/hardware.h"
#include "diode/json.h"
#include "diode/sha256.h"
#include "diode/wire.h"
#include "expand.h"
#include "manifest.h"

using namespace diode::fleet;

namespace {

const char* kGood = R"(version: 1
name: test-sweep
requester: me
hardware:
  device_name: "H100"
  compute_capability: "9.0"
sweep:
  ops: [mm, bmm]
  dtypes: [float16]
  problems: 1000
  problems_per_shard: 64
  seed: 7
  shapes:
    distribution: lognormal
)";

std::vector<std::string> errors_of(const std::string& yaml) {
  try {
    parse_manifest(yaml, "m.yaml");
  } catch (const ManifestError& e) {
    return e.errors();
  }
  return {};
}

// `yaml` with its first `from` replaced by `to`: one edit of a test's manifest.
std::string edited(std::string yaml, const std::string& from, const std::string& to) {
  yaml.replace(yaml.find(from), from.size(), to);
  return yaml;
}

}  // namespace

TEST(Manifest, ShippedManifestsValidate) {
  for (const char* hw : {"h100", "h200", "a100", "mi300x"}) {
    Manifest m = load_manifest(std::string(DIODE_MANIFEST_DIR) + "/" + hw + ".yaml");
    EXPECT_EQ(m.shard_count(), 400u) << hw;
    EXPECT_EQ(m.scheduled, std::string(hw) != "mi300x");
  }
}

TEST(Manifest, ErrorsNameLineColumnAndField) {
  std::string bad = edited(kGood, "problems: 1000", "problems: -3");
  auto errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "m.yaml:10:13: sweep.problems: expected a non-negative integer, got '-3'");

  errs = errors_of(std::string(kGood) + "extra_field: 1\n");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "m.yaml:15:1: extra_field: unknown field");

  bad = edited(kGood, "[float16]", "[float8]");
  errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("m.yaml:9:12: sweep.dtypes[0]: 'float8' is not one of"), std::string::npos) << errs[0];

  errs = errors_of("name: [unclosed\n");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("(yaml)"), std::string::npos);

  // Several problems are reported at once.
  errs = errors_of("version: 2\nname: BAD NAME\nrequester: x\nhardware: {device_name: '('}\nsweep: {}\n");
  EXPECT_GE(errs.size(), 4u);
}

TEST(Manifest, HardwareMatching) {
  Manifest m = parse_manifest(kGood, "m.yaml");
  diode::HardwareId h;
  h.vendor = "nvidia";
  h.device_name = "NVIDIA H100 80GB HBM3";
  h.compute_capability = "9.0";
  h.memory_bytes = 85520809984ull;
  EXPECT_TRUE(hardware_matches(m.hardware, h));
  h.compute_capability = "8.0";
  EXPECT_FALSE(hardware_matches(m.hardware, h));
  h.compute_capability = "9.0";
  h.device_name = "NVIDIA A100-SXM4-80GB";
  EXPECT_FALSE(hardware_matches(m.hardware, h));
}

// `hardware.key` pins the exact hardware key: the memory lower bound alone would also
// take a larger card of the same name (an H200 of 140 GiB under `min_memory_gib: 130`).
TEST(Manifest, HardwareKeyIsOneMoreRule) {
  const std::string y =
      edited(kGood, "  compute_capability", "  vendor: nvidia\n  key: nvidia-h100-80gb\n  compute_capability");
  Manifest m = parse_manifest(y, "m.yaml");
  EXPECT_EQ(m.hardware.key, "nvidia-h100-80gb");
  diode::HardwareId h;
  h.vendor = "nvidia";
  h.device_name = "NVIDIA H100 80GB HBM3";
  h.compute_capability = "9.0";
  h.memory_bytes = 85520809984ull;
  ASSERT_EQ(diode::hardware_key(h), "nvidia-h100-80gb");
  EXPECT_TRUE(hardware_matches(m.hardware, h));
  h.device_name = "NVIDIA H100 PCIe";  // same rules otherwise, another key
  EXPECT_FALSE(hardware_matches(m.hardware, h));
  std::string why;
  EXPECT_EQ(resolve_hardware_key(m.hardware, &why).value_or("-"), "nvidia-h100-80gb");
  EXPECT_EQ(hardware_rules_text(m.hardware), "vendor=nvidia device_name=H100 cc=9.0 key=nvidia-h100-80gb");
  // A change of key is a change of the manifest.
  EXPECT_EQ(manifest_fields(m).at("hardware.key"), "nvidia-h100-80gb");
  // search_space in any case, as the hook's install(search_space=...) takes it.
  const std::string lower = edited(y, "  shapes:", "  search_space: exhaustive\n  shapes:");
  EXPECT_EQ(parse_manifest(lower, "m.yaml").search_space, "EXHAUSTIVE");

  std::string bad = edited(y, "nvidia-h100-80gb", "H100 80GB");
  auto errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("hardware.key: 'H100 80GB' is not a hardware key"), std::string::npos) << errs[0];
  bad = edited(y, "nvidia-h100-80gb", "amd-mi300x-184gb");
  errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("does not start with the vendor 'nvidia-'"), std::string::npos) << errs[0];
}

TEST(Expand, DeterministicAndShaped) {
  Manifest m = parse_manifest(kGood, "m.yaml");
  auto a = expand_shards(m), b = expand_shards(m);
  ASSERT_EQ(a.size(), 16u);  // ceil(1000 / 64)
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].problems, b[i].problems);
    EXPECT_EQ(shard_spec(m, a[i]).dump(), shard_spec(m, b[i]).dump());
  }
  EXPECT_EQ(a[0].id, "test-sweep/s000000");
  EXPECT_EQ(a.back().problems.size(), 1000u - 15 * 64);
  // Dimensions are multiples of 8; ln(M) has roughly the requested mean and std.
  double sum = 0, sq = 0;
  size_t n = 0;
  for (const auto& s : a)
    for (const auto& p : s.problems) {
      EXPECT_EQ(p.m % 8, 0u);
      EXPECT_EQ(p.k % 8, 0u);
      if (p.op == "mm") {
        EXPECT_EQ(p.batch, 1u);
      }
      double l = std::log(static_cast<double>(p.m));
      sum += l;
      sq += l * l;
      ++n;
    }
  double mean = sum / static_cast<double>(n), sd = std::sqrt(sq / static_cast<double>(n) - mean * mean);
  EXPECT_NEAR(mean, 6.57, 0.35);  // clamping at 8 and 65536 shifts it a little
  EXPECT_NEAR(sd, 2.3, 0.4);
  // A different seed gives different problems.
  m.seed = 8;
  EXPECT_NE(expand_shards(m)[0].problems, a[0].problems);
}

TEST(Expand, GridAndExplicit) {
  const std::string g = edited(kGood, "distribution: lognormal",
                               "distribution: grid\n    m: [64, 128]\n    n: [256]\n    k: [32, 64, 96]\n    batch: [2]");
  Manifest m = parse_manifest(g, "m.yaml");
  auto probs = expand_problems(m);
  EXPECT_EQ(probs.size(), 2u * 1 * 3 * 2);  // shapes x ops (mm, bmm with one batch)
  EXPECT_EQ(probs[0].m, 64u);
  EXPECT_EQ(probs[1].op, "bmm");
  EXPECT_EQ(probs[1].batch, 2u);
}

// Issue 16, item 6: two `priority:` lines passed validation (yaml-cpp keeps
// both pairs and answers the first). A duplicate key anywhere is an error with
// its position, like every other manifest error.
TEST(Manifest, DuplicateKeysAreRefused) {
  auto errs = errors_of(std::string(kGood) + "priority: 1\npriority: 1000\n");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "m.yaml:16:1: priority: duplicate key (first at line 15, column 1)");

  std::string nested = edited(kGood, "  seed: 7\n", "  seed: 7\n  seed: 8\n");
  errs = errors_of(nested);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "m.yaml:13:3: sweep.seed: duplicate key (first at line 12, column 3)");

  std::string flow = edited(kGood, "hardware:\n  device_name: \"H100\"\n  compute_capability: \"9.0\"\n",
                            "hardware: {device_name: \"H100\", device_name: \"A100\"}\n");
  errs = errors_of(flow);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("m.yaml:4:33: hardware.device_name: duplicate key"), std::string::npos) << errs[0];

  // Inside a list of mappings, and quoted spellings of the same key.
  std::string grid = edited(kGood, "distribution: lognormal", "distribution: lognormal\n    'distribution': grid");
  errs = errors_of(grid);
  ASSERT_GE(errs.size(), 1u);
  EXPECT_NE(errs[0].find("m.yaml:15:5: sweep.shapes.distribution: duplicate key"), std::string::npos) << errs[0];

  // Equal values under different keys are fine; aliases are not expanded.
  EXPECT_TRUE(errors_of(std::string(kGood) + "priority: &p 5\nmax_attempts: *p\n").empty());
}

// Found by tests/fuzz/fuzz_manifest: a required field that is missing was reported, and then
// read anyway, and yaml-cpp threw YAML::InvalidNode out of parse_manifest (no file:line, no
// ManifestError).
TEST(Manifest, MissingRequiredFieldsAreManifestErrors) {
  auto errs = errors_of(edited(kGood, "shapes:\n    distribution: lognormal\n", "shapes: {}\n"));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "m.yaml:13:11: sweep.shapes.distribution: missing required field");

  errs = errors_of(edited(kGood, "  device_name: \"H100\"\n", "  vendor: nvidia\n"));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "m.yaml:5:3: hardware.device_name: missing required field");
}

// Found by tests/fuzz/fuzz_manifest: the one-byte manifest "," hung parse_manifest (yaml-cpp
// 0.7 returns an empty document for it forever, and every document was scanned for
// duplicate keys). Only the first document is read, and a second one is refused.
TEST(Manifest, OneYamlDocument) {
  auto errs = errors_of(",");
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0], "m.yaml:1:1: (yaml): more than one YAML document (a manifest is one document)");
  EXPECT_EQ(errs[1], "m.yaml:1:1: : expected a mapping");

  errs = errors_of(std::string(kGood) + "---\npriority: 5\n");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "m.yaml:15:1: (yaml): more than one YAML document (a manifest is one document)");
  EXPECT_TRUE(errors_of("---\n" + std::string(kGood) + "...\n").empty());
}

// Found by tests/fuzz/fuzz_manifest: a byte that is not UTF-8 in a value (here 0x94 in
// device_name) passed, and manifest_fields(m).dump() (the coordinator's store) threw
// nlohmann's type_error 316.
TEST(Manifest, TextMustBeUtf8) {
  std::string bad = edited(kGood, "\"H100\"", "\"H\x94" "100\"");
  auto errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "m.yaml:5:18: (yaml): not valid UTF-8 (a manifest is UTF-8 text)");
  // Overlong forms, surrogates and truncated sequences too; real UTF-8 is fine.
  for (const char* b : {"\xc0\xa0", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80"})
    EXPECT_EQ(errors_of(std::string(kGood) + "# " + b + "\n").size(), 1u) << b;
  EXPECT_TRUE(errors_of(std::string(kGood) + "# H\xe2\x82\xac \xf0\x9f\x98\x80\n").empty());
}

namespace {
std::string with_hardware(const std::string& device_name, const std::string& cc = "9.0") {
  return edited(kGood, "  device_name: \"H100\"\n  compute_capability: \"9.0\"\n",
                "  device_name: '" + device_name + "'\n  compute_capability: '" + cc + "'\n");
}
}  // namespace

// hardware.device_name is a requester's regular expression matched against device names
// that workers and contributors send (REGISTER, hub ingest). libstdc++'s default matcher
// backtracks: "(.*)*Z" against 96 'a's ran for hours, and a 30,000-digit
// compute_capability blew the stack of its check. Patterns are now bounded and matched
// in polynomial time.
TEST(Manifest, DeviceNamePatternsAreBounded) {
  diode::HardwareId h;
  h.vendor = "nvidia";
  h.device_name = std::string(96, 'a');  // the longest plausible name
  h.compute_capability = "9.0";
  h.memory_bytes = 85520809984ull;
  const auto t0 = std::chrono::steady_clock::now();
  for (const char* p : {"(.*)*Z", "(a|a)*(a|a)*(a|a)*Z", ".*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*Z"}) {
    Manifest m = parse_manifest(with_hardware(p), "m.yaml");
    EXPECT_FALSE(hardware_matches(m.hardware, h)) << p;
    EXPECT_TRUE(hardware_matches(m.hardware, [&] {
      auto z = h;
      z.device_name += "Z";
      return z;
    }())) << p;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  // Ordinary patterns keep working (case-insensitive search).
  h.device_name = "NVIDIA H100 80GB HBM3";
  EXPECT_TRUE(hardware_matches(parse_manifest(with_hardware("^nvidia h1[02]0( |$)"), "m.yaml").hardware, h));

  auto errs = errors_of(with_hardware("(?:a?){15000}Z"));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("m.yaml:5:16: hardware.device_name: '{' is not allowed: counted repetition"),
            std::string::npos) << errs[0];
  errs = errors_of(with_hardware("(H)\\1"));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("hardware.device_name: back-references"), std::string::npos) << errs[0];
  errs = errors_of(with_hardware(std::string(129, 'H')));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "m.yaml:5:16: hardware.device_name: longer than 128 characters");
  errs = errors_of(with_hardware("("));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("hardware.device_name: invalid regular expression"), std::string::npos) << errs[0];

  // Over-long strings are cut before any further check (the regex of compute_capability
  // recursed once per character).
  errs = errors_of(with_hardware("H100", std::string(30000, '1')));
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0], "m.yaml:6:23: hardware.compute_capability: longer than 16 characters");
  EXPECT_NE(errs[1].find("'1111111111111111' is not like 9.0"), std::string::npos) << errs[1];
}

// `distribution: problems`: whole problems (layout, bias, batch) listed in order, as the
// dataset mix sampler writes them; each checked by the wire format's rules and against
// sweep.ops/dtypes.
TEST(Expand, ProblemList) {
  std::string g = edited(kGood, "problems: 1000", "problems: 3");
  g = edited(g, "distribution: lognormal",
             "distribution: problems\n    list:\n"
             "      - {op: mm, dtype: float16, m: 7, n: 4096, k: 1024, trans_b: true}\n"
             "      - {op: bmm, dtype: float16, batch: 32, m: 512, n: 512, k: 128, trans_b: true}\n"
             "      - {op: mm, dtype: float16, m: 7, n: 4096, k: 1024, trans_b: true}\n"
             "      - {op: mm, dtype: float16, m: 64, n: 64, k: 64}");
  Manifest m = parse_manifest(g, "m.yaml");
  auto probs = expand_problems(m);
  ASSERT_EQ(probs.size(), 3u);  // the repeat is collected once; then the third distinct one
  EXPECT_EQ(probs[0].m, 7u);
  EXPECT_TRUE(probs[0].trans_b);
  EXPECT_EQ(probs[0].bias, "none");
  EXPECT_EQ(probs[1].op, "bmm");
  EXPECT_EQ(probs[1].batch, 32u);
  EXPECT_EQ(probs[2].m, 64u);
  EXPECT_FALSE(probs[2].trans_b);
}

TEST(Manifest, ProblemListErrors) {
  std::string g = edited(kGood, "problems: 1000", "problems: 5");
  g = edited(g, "distribution: lognormal",
             "distribution: problems\n    list:\n"
             "      - {op: addmm, dtype: float16, m: 7, n: 4096, k: 1024}\n"     // op not in sweep.ops
             "      - {op: mm, dtype: bfloat16, m: 7, n: 4096, k: 1024}\n"       // dtype not in sweep.dtypes
             "      - {op: mm, dtype: float16, m: 7, n: 4096, k: 1024, bias: row}\n"  // mm has no bias
             "      - {op: mm, dtype: float16, m: 7, n: 4096}");                // k missing
  auto errs = errors_of(g);
  auto has = [&](const std::string& s) {
    for (const auto& e : errs)
      if (e.find(s) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("sweep.shapes.list[0].op: 'addmm' is not in sweep.ops")) << ::testing::PrintToString(errs);
  EXPECT_TRUE(has("sweep.shapes.list[1].dtype: 'bfloat16' is not in sweep.dtypes"));
  EXPECT_TRUE(has("sweep.shapes.list[2]"));
  EXPECT_TRUE(has("sweep.shapes.list[3].k: missing required field"));
  EXPECT_TRUE(has("sweep.problems: larger than the 4 problems listed"));
}

// A resubmitted `problems` manifest that changed one listed problem is described as such
// (the conflict message names the field), not as an unchanged "explicit" distribution.
TEST(Manifest, ProblemListChangeIsDescribed) {
  std::string g = edited(kGood, "problems: 1000", "problems: 1");
  g = edited(g, "distribution: lognormal",
             "distribution: problems\n    list:\n      - {op: mm, dtype: float16, m: 7, n: 4096, k: 1024}");
  std::string h = edited(g, "m: 7,", "m: 9,");
  auto a = manifest_fields(parse_manifest(g, "a.yaml")), b = manifest_fields(parse_manifest(h, "b.yaml"));
  EXPECT_EQ(a["sweep.shapes.distribution"], "problems");
  std::string d = describe_manifest_change(a, b);
  EXPECT_NE(d.find("sweep.shapes.list"), std::string::npos) << d;
  EXPECT_EQ(describe_manifest_change(a, a), "");
}

// sweep.timing's collector limits reach every shard spec; defaults are the collector's.
TEST(Manifest, TimingProblemTimeoutAndStaticTopReachTheSpec) {
  Manifest m = parse_manifest(kGood, "m.yaml");
  auto spec = shard_spec(m, expand_shards(m).at(0));
  EXPECT_EQ(spec["timing"]["problem_timeout_s"], 900.0);
  EXPECT_EQ(spec["timing"]["static_top"], 10);

  const std::string with = std::string(kGood) + "  timing: {problem_timeout_s: 120, static_top: 0}\n";
  m = parse_manifest(with, "m.yaml");
  spec = shard_spec(m, expand_shards(m).at(0));
  EXPECT_EQ(spec["timing"]["problem_timeout_s"], 120.0);
  EXPECT_EQ(spec["timing"]["static_top"], 0);
  EXPECT_EQ(manifest_fields(m).at("sweep.timing.static_top"), 0);

  auto errs = errors_of(std::string(kGood) + "  timing: {static_top: 101}\n");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("sweep.timing.static_top"), std::string::npos) << errs[0];
  errs = errors_of(std::string(kGood) + "  timing: {problem_timeout_s: 0}\n");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("sweep.timing.problem_timeout_s"), std::string::npos) << errs[0];
}

// ---- Decision families: GEMM manifests are unchanged, scaled_mm (FP8) manifests ----

namespace {

// `diode manifest shards FILE`'s output ("<id> <problems> <sha256 of the spec JSON>" per
// shard), hashed: the whole expansion, spec bytes included, in one value.
std::string expansion_digest(const Manifest& m) {
  std::string text;
  for (const auto& plan : expand_shards(m))
    text += plan.id + " " + std::to_string(plan.problems.size()) + " " +
            diode::to_hex(diode::sha256(shard_spec(m, plan).dump())) + "\n";
  return diode::to_hex(diode::sha256(text));
}

const char* kFp8 = R"(version: 1
name: fp8-sweep
requester: me
hardware:
  device_name: "H200"
sweep:
  ops: [scaled_mm]
  dtypes: [float8_e4m3fn]
  scales: [tensor, row]
  problems: 400
  problems_per_shard: 12
  seed: 11
  shapes:
    distribution: lognormal
)";

bool has_error(const std::vector<std::string>& errs, const std::string& s) {
  for (const auto& e : errs)
    if (e.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace

// The shipped GEMM manifests expand to exactly the shards (ids, problem counts, spec
// bytes) they did before scaled_mm existed: these digests are of `diode manifest shards`
// output recorded then.
TEST(Expand, GemmManifestsExpandAsBefore) {
  const std::pair<const char*, const char*> golden[] = {
      {"h100", "d8c939576604a366427ee5b772c7303b3c28ecacfd9d9393c5303f6fd71ad65c"},
      {"h200", "12a5a1d10f1a3134790c821c5a63c7a8f2891e46df6a26ed4bf0a470ea87d2a3"},
      {"a100", "070656d4fedbb794417089508e0a22688da9440449ffd3ea018699b588b8f438"},
      {"h200-mix-2026112506", "ae309a2ab577a2b99187e44efb1c237eda84332908053271f782ba086f542036"},
  };
  for (const auto& [name, digest] : golden) {
    Manifest m = load_manifest(std::string(DIODE_MANIFEST_DIR) + "/" + name + ".yaml");
    EXPECT_EQ(m.family, "gemm") << name;
    EXPECT_TRUE(m.scales.empty()) << name;
    EXPECT_EQ(expansion_digest(m), digest) << name;
    // No new stored field for a GEMM manifest (a change description stays as before).
    auto f = manifest_fields(m);
    EXPECT_FALSE(f.contains("sweep.scales")) << name;
    EXPECT_FALSE(f.contains("sweep.out_dtype")) << name;
  }
}

TEST(Manifest, ScaledMmSchemaErrors) {
  // scales / out_dtype without scaled_mm.
  auto errs = errors_of(std::string(kGood) + "  scales: [row]\n  out_dtype: float32\n");
  ASSERT_EQ(errs.size(), 2u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0], "m.yaml:15:11: sweep.scales: only for op scaled_mm (sweep.ops has no scaled_mm)");
  EXPECT_EQ(errs[1], "m.yaml:16:14: sweep.out_dtype: only for op scaled_mm (sweep.ops has no scaled_mm)");

  // One family per manifest: the error names sweep.ops and both families' ops.
  std::string mixed = edited(kFp8, "[scaled_mm]", "[mm, scaled_mm]");
  errs = errors_of(mixed);
  ASSERT_EQ(errs.size(), 1u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0],
            "m.yaml:7:8: sweep.ops: mixes the decision families gemm (mm) and scaled_mm (scaled_mm): a manifest "
            "requests one family; split it into two manifests");

  // Dtypes: a GEMM dtype for scaled_mm, FP8 for a GEMM op, an unknown one.
  std::string bad = edited(kFp8, "[float8_e4m3fn]", "[float8_e4m3fn, bfloat16]");
  errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0], "m.yaml:8:27: sweep.dtypes[1]: 'bfloat16' is not an operand dtype of scaled_mm "
                     "(float8_e4m3fn; the output dtype is sweep.out_dtype)");
  bad = edited(kGood, "[float16]", "[float8_e4m3fn]");
  errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0], "m.yaml:9:12: sweep.dtypes[0]: 'float8_e4m3fn' is an operand dtype of op scaled_mm only "
                     "(mm, bmm take float16, bfloat16, float32)");
  bad = edited(kFp8, "[float8_e4m3fn]", "[float8_e5m2]");
  errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u) << ::testing::PrintToString(errs);
  EXPECT_NE(errs[0].find("m.yaml:8:12: sweep.dtypes[0]: 'float8_e5m2' is not one of"), std::string::npos) << errs[0];

  // Bad scale and out_dtype values.
  bad = edited(kFp8, "[tensor, row]", "[tensor, column]");
  errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0], "m.yaml:9:20: sweep.scales[1]: 'column' is not one of row, tensor");
  bad = edited(kFp8, "[tensor, row]", "[row, row]");
  errs = errors_of(bad);
  ASSERT_EQ(errs.size(), 1u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0], "m.yaml:9:17: sweep.scales[1]: duplicate 'row'");
  errs = errors_of(std::string(kFp8) + "  out_dtype: float32\n");
  ASSERT_EQ(errs.size(), 1u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0], "m.yaml:15:14: sweep.out_dtype: 'float32' is not collected: scaled_mm is measured with "
                     "out_dtype bfloat16 only");

  // `problems` entries: N and K multiples of 16 (M free), scale within sweep.scales, wire rules.
  std::string list = edited(kFp8, "scales: [tensor, row]", "scales: [row]");
  list = edited(list, "problems: 400", "problems: 3");
  list = edited(list, "distribution: lognormal",
                "distribution: problems\n    list:\n"
                "      - {op: scaled_mm, dtype: float8_e4m3fn, m: 1, n: 4104, k: 4100, scale: row}\n"
                "      - {op: scaled_mm, dtype: float8_e4m3fn, m: 16, n: 4096, k: 4096}\n"
                "      - {op: scaled_mm, dtype: float8_e4m3fn, m: 16, n: 4096, k: 4096, scale: row, bias: row}\n");
  errs = errors_of(list);
  EXPECT_TRUE(has_error(errs, "m.yaml:16:56: sweep.shapes.list[0].n: 4104 is not a multiple of 16 (torch._scaled_mm "
                               "needs K and N multiples of 16)"))
      << ::testing::PrintToString(errs);
  EXPECT_TRUE(has_error(errs, "sweep.shapes.list[0].k: 4100 is not a multiple of 16"));
  EXPECT_FALSE(has_error(errs, "sweep.shapes.list[0].m"));  // M = 1: a decode step
  EXPECT_TRUE(has_error(errs, "sweep.shapes.list[1].scale: 'tensor' is not in sweep.scales"));
  EXPECT_TRUE(has_error(errs, "m.yaml:18:9: sweep.shapes.list[2]: sweep.shapes.list[2].bias: op scaled_mm takes no bias"));
  EXPECT_EQ(errs.size(), 4u) << ::testing::PrintToString(errs);

  // A GEMM entry takes no scale (the wire rules).
  std::string gemm = edited(kGood, "problems: 1000", "problems: 1");
  gemm = edited(gemm, "distribution: lognormal",
                "distribution: problems\n    list:\n      - {op: mm, dtype: float16, m: 8, n: 8, k: 8, scale: row}");
  errs = errors_of(gemm);
  ASSERT_EQ(errs.size(), 1u) << ::testing::PrintToString(errs);
  EXPECT_NE(errs[0].find("sweep.shapes.list[0].scale: op mm takes scale none"), std::string::npos) << errs[0];
}

// Every scaled_mm problem is valid by the wire rules, has the family's fixed fields,
// M/N/K rounded up to multiples of 16, and every drawn shape comes once per scale.
TEST(Expand, ScaledMmLognormal) {
  Manifest m = parse_manifest(kFp8, "m.yaml");
  EXPECT_EQ(m.family, "scaled_mm");
  EXPECT_EQ(m.scales, (std::vector<std::string>{"tensor", "row"}));
  EXPECT_EQ(m.out_dtype, "bfloat16");
  auto probs = expand_problems(m);
  ASSERT_EQ(probs.size(), 400u);
  for (size_t i = 0; i < probs.size(); ++i) {
    const auto& p = probs[i];
    EXPECT_NO_THROW(diode::wire::validate(p, "problem")) << i;
    EXPECT_EQ(p.op, "scaled_mm");
    EXPECT_EQ(p.batch, 1u);
    EXPECT_EQ(p.dtype_a, "float8_e4m3fn");
    EXPECT_EQ(p.dtype_b, "float8_e4m3fn");
    EXPECT_EQ(p.dtype_out, "bfloat16");
    EXPECT_FALSE(p.trans_a);
    EXPECT_TRUE(p.trans_b);
    EXPECT_EQ(p.bias, "none");
    for (uint64_t d : {p.m, p.n, p.k}) {
      EXPECT_EQ(d % 16, 0u) << i;
      EXPECT_GE(d, 16u) << i;
    }
    // Crossed: tensor then row for the same shape.
    EXPECT_EQ(p.scale, i % 2 == 0 ? "tensor" : "row") << i;
    if (i % 2 == 1) {
      EXPECT_EQ(p.m, probs[i - 1].m);
      EXPECT_EQ(p.n, probs[i - 1].n);
      EXPECT_EQ(p.k, probs[i - 1].k);
    }
  }
  // The draws are the GEMM expansion's: the first shape is mm's first, rounded up to 16.
  std::string mm = edited(kFp8, "[scaled_mm]", "[mm]");
  mm = edited(mm, "[float8_e4m3fn]", "[float16]");
  mm = edited(mm, "  scales: [tensor, row]\n", "");
  auto gemm = expand_problems(parse_manifest(mm, "mm.yaml"));
  auto up16 = [](uint64_t d) { return d <= 16 ? 16 : (d + 15) / 16 * 16; };
  EXPECT_EQ(probs[0].m, up16(gemm[0].m));
  EXPECT_EQ(probs[0].n, up16(gemm[0].n));
  EXPECT_EQ(probs[0].k, up16(gemm[0].k));
  EXPECT_EQ(gemm[0].scale, "none");

  // The collector's spec carries the scale (the shared JSON form); GEMM specs do not.
  auto spec = shard_spec(m, expand_shards(m).at(0));
  ASSERT_EQ(spec["problems"].size(), 12u);
  EXPECT_EQ(spec["problems"][0]["scale"], "tensor");
  EXPECT_EQ(spec["problems"][1]["scale"], "row");
  EXPECT_EQ(spec["problems"][1]["dtype_a"], "float8_e4m3fn");
  EXPECT_EQ(diode::problem_from_json(spec["problems"][1]), probs[1]);
  auto gspec = shard_spec(m, ShardPlan{"x/s000000", 0, {gemm[0]}});
  EXPECT_FALSE(gspec["problems"][0].contains("scale"));

  // The stored fields name the scaled_mm keys; a changed scale list is described.
  auto f = manifest_fields(m);
  EXPECT_EQ(f.at("sweep.scales"), nlohmann::json({"tensor", "row"}));
  EXPECT_EQ(f.at("sweep.out_dtype"), "bfloat16");
  std::string one = edited(kFp8, "[tensor, row]", "[row]");
  Manifest rows = parse_manifest(one, "m.yaml");
  EXPECT_NE(describe_manifest_change(f, manifest_fields(rows)).find("sweep.scales"), std::string::npos);
  for (const auto& p : expand_problems(rows)) EXPECT_EQ(p.scale, "row");

  // Default scale list; out_dtype stated.
  std::string dflt = edited(kFp8, "  scales: [tensor, row]\n", "  out_dtype: bfloat16\n");
  Manifest t = parse_manifest(dflt, "m.yaml");
  EXPECT_EQ(t.scales, std::vector<std::string>{"tensor"});
  auto tp = expand_problems(t);
  ASSERT_EQ(tp.size(), 400u);
  for (const auto& p : tp) {
    EXPECT_EQ(p.scale, "tensor");
    EXPECT_EQ(p.dtype_out, "bfloat16");
  }
}

TEST(Expand, ScaledMmExplicitGridAndList) {
  std::string g = edited(kFp8, "distribution: lognormal",
                         "distribution: explicit\n    shapes: [[1, 4100, 4095], [16, 4096, 4096], [8, 4096, 4096]]");
  auto probs = expand_problems(parse_manifest(g, "m.yaml"));
  // Order: shape, op, dtype, scale; [8, ...] rounds to the second shape: dropped as a duplicate.
  ASSERT_EQ(probs.size(), 4u);
  EXPECT_EQ(probs[0].m, 16u);
  EXPECT_EQ(probs[0].n, 4112u);
  EXPECT_EQ(probs[0].k, 4096u);
  EXPECT_EQ(probs[0].scale, "tensor");
  EXPECT_EQ(probs[1].n, 4112u);
  EXPECT_EQ(probs[1].scale, "row");
  EXPECT_EQ(probs[2].n, 4096u);
  EXPECT_EQ(probs[2].scale, "tensor");
  EXPECT_EQ(probs[3].scale, "row");

  g = edited(kFp8, "distribution: lognormal", "distribution: grid\n    m: [16, 33]\n    n: [1024]\n    k: [4096]");
  probs = expand_problems(parse_manifest(g, "m.yaml"));
  ASSERT_EQ(probs.size(), 4u);
  EXPECT_EQ(probs[2].m, 48u);
  EXPECT_EQ(probs[3].scale, "row");
  for (const auto& p : probs) EXPECT_NO_THROW(diode::wire::validate(p, "problem"));

  g = edited(kFp8, "problems: 400", "problems: 2");
  g = edited(g, "distribution: lognormal",
             "distribution: problems\n    list:\n"
             "      - {op: scaled_mm, dtype: float8_e4m3fn, m: 16, n: 1024, k: 4096, scale: row}\n"
             "      - {op: scaled_mm, dtype: float8_e4m3fn, m: 32, n: 1024, k: 4096}\n");
  probs = expand_problems(parse_manifest(g, "m.yaml"));
  ASSERT_EQ(probs.size(), 2u);
  EXPECT_EQ(probs[0].scale, "row");
  EXPECT_EQ(probs[1].scale, "tensor");
  EXPECT_TRUE(probs[1].trans_b);
  EXPECT_EQ(probs[1].dtype_out, "bfloat16");
}

// The shipped FP8 sweep: H200, 360 problems in 30 shards, every problem a valid
// scaled_mm problem with both scales.
TEST(Manifest, ShippedFp8ManifestExpands) {
  Manifest m = load_manifest(std::string(DIODE_MANIFEST_DIR) + "/h200-fp8-2026112904.yaml");
  EXPECT_EQ(m.family, "scaled_mm");
  EXPECT_EQ(m.hardware.key, "nvidia-h200-144gb");
  EXPECT_EQ(m.search_space, "DEFAULT");
  EXPECT_EQ(m.timing.problem_timeout_s, 120.0);
  auto shards = expand_shards(m);
  size_t n = 0, rows = 0;
  for (const auto& s : shards) {
    EXPECT_LE(s.problems.size(), 12u);
    for (const auto& p : s.problems) {
      ++n;
      rows += p.scale == "row";
      EXPECT_NO_THROW(diode::wire::validate(p, "problem"));
      EXPECT_EQ(p.op, "scaled_mm");
      EXPECT_EQ(p.m % 16 + p.n % 16 + p.k % 16, 0u);
    }
  }
  EXPECT_EQ(n, m.problems);
  EXPECT_EQ(n, 360u);
  EXPECT_EQ(shards.size(), 30u);
  EXPECT_EQ(rows, n / 2);
}
