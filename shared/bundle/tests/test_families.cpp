// Decision families in bundles (docs/bundle-format.md, Decision families): a bundle
// of a family other than gemm names it in its signed block and index, lives below
// <hw>/families/<family>/ in the registry, the hub and the cache; a GEMM bundle is
// byte for byte what it always was.
#include <gtest/gtest.h>

#include "diode/bundle/client.h"
#include "diode/bundle/http_fetch.h"
#include "fixture.h"

using namespace diode::bundle;
using namespace diode::bundle::testing;

namespace {
constexpr const char* kFam = "scaled_mm";

// A World with the GEMM example model and a scaled_mm example model beside it.
struct FamilyWorld : World {
  fs::path fam_model = tmp / "model-scaled_mm";
  FamilyWorld() { write_example_model(fam_model.string(), kHw, 8, 1, kFam); }
  PublishResult publish_family() {
    PublishOptions o;
    o.now = now;
    return publish(registry.string(), fam_model.string(), load_signing_keys(keys.string()), o);
  }
  fs::path fam_dir() const { return registry / kHw / "families" / kFam; }
};

json read_json(const fs::path& p) { return json::parse(slurp(p)); }

std::string verify_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const VerifyError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Families, PublishWritesTheFamilyInTheSignedBlockAndIndex) {
  FamilyWorld w;
  const PublishResult r = w.publish_family();
  EXPECT_EQ(r.family, kFam);
  EXPECT_EQ(r.version, 1u);
  EXPECT_EQ(fs::path(r.dir), w.fam_dir() / "1");
  const json b = read_json(w.fam_dir() / "1" / "bundle.json");
  EXPECT_EQ(b["signed"]["family"], kFam);
  EXPECT_EQ(read_json(w.fam_dir() / "index.json")["index"]["signed"]["family"], kFam);
  // The family's versions count on their own: the GEMM index is untouched (none yet).
  EXPECT_FALSE(fs::exists(w.hw_dir() / "index.json"));
  const BundleMeta m = verify_bundle_dir(r.dir, w.pinned(), w.now);
  EXPECT_EQ(m.family, kFam);
  EXPECT_EQ(verify_bundle_dir(r.dir, w.pinned(), w.now, kFam).version, 1u);
  const std::string err = verify_error([&] { verify_bundle_dir(r.dir, w.pinned(), w.now, kGemmFamily); });
  EXPECT_NE(err.find("is of decision family scaled_mm, not the requested gemm"), std::string::npos) << err;
}

TEST(Families, GemmBundleHasNoFamilyField) {
  FamilyWorld w;
  const PublishResult r = w.publish_now();
  EXPECT_EQ(r.family, kGemmFamily);
  EXPECT_EQ(fs::path(r.dir), w.hw_dir() / "1");
  EXPECT_FALSE(read_json(w.hw_dir() / "1" / "bundle.json")["signed"].contains("family"));
  EXPECT_FALSE(read_json(w.hw_dir() / "index.json")["index"]["signed"].contains("family"));
  EXPECT_EQ(verify_bundle_dir(r.dir, w.pinned(), w.now).family, kGemmFamily);
  EXPECT_EQ(verify_bundle_dir(r.dir, w.pinned(), w.now, kGemmFamily).family, kGemmFamily);
  const std::string err = verify_error([&] { verify_bundle_dir(r.dir, w.pinned(), w.now, kFam); });
  EXPECT_NE(err.find("is of decision family gemm, not the requested scaled_mm"), std::string::npos) << err;
}

TEST(Families, TamperingWithTheFamilyFailsVerification) {
  FamilyWorld w;
  const PublishResult r = w.publish_family();
  const fs::path bj = fs::path(r.dir) / "bundle.json";
  const std::string original = slurp(bj);
  for (const auto& edit : std::vector<std::function<void(json&)>>{
           [](json& s) { s.erase("family"); },                 // passed off as a GEMM bundle
           [](json& s) { s["family"] = "gemm"; },              // the same, spelled out
           [](json& s) { s["family"] = "conv"; }}) {           // an unknown family
    json env = json::parse(original);
    edit(env["signed"]);
    spit(bj, env.dump(2));
    const std::string err = verify_error([&] { verify_bundle_dir(r.dir, w.pinned(), w.now); });
    EXPECT_FALSE(err.empty());
  }
  // Erased: the signature no longer covers what is there.
  json env = json::parse(original);
  env["signed"].erase("family");
  spit(bj, env.dump(2));
  EXPECT_NE(verify_error([&] { verify_bundle_dir(r.dir, w.pinned(), w.now); }).find("invalid signature"),
            std::string::npos);
  spit(bj, original);
  EXPECT_NO_THROW(verify_bundle_dir(r.dir, w.pinned(), w.now));
}

TEST(Families, ParseRefusesAnExplicitGemmAndUnknownFamilies) {
  FamilyWorld w;
  const PublishResult r = w.publish_now();
  json s = read_json(fs::path(r.dir) / "bundle.json")["signed"];
  EXPECT_EQ(parse_bundle(s).family, kGemmFamily);  // absent = gemm
  s["family"] = "gemm";
  std::string err = verify_error([&] { parse_bundle(s); });
  EXPECT_NE(err.find("bundle.json.family"), std::string::npos) << err;
  s["family"] = "conv2d";
  err = verify_error([&] { parse_bundle(s); });
  EXPECT_NE(err.find("conv2d"), std::string::npos) << err;
  s["family"] = 7;
  EXPECT_NE(verify_error([&] { parse_bundle(s); }).find("bundle.json.family: not a string"), std::string::npos);
  s["family"] = kFam;
  EXPECT_EQ(parse_bundle(s).family, kFam);
}

TEST(Families, ModelJsonFamilyMustMatchItsFeatureSpec) {
  FamilyWorld w;
  json m = read_json(w.fam_model / "model.json");
  const auto shapes = check_weights(slurp(w.fam_model / "weights.msgpack"));
  EXPECT_NO_THROW(check_model(m, shapes));
  EXPECT_EQ(model_family(m), kFam);
  m.erase("family");  // a scaled_mm feature spec in a model that says gemm
  std::string err = verify_error([&] { check_model(m, shapes); });
  EXPECT_NE(err.find("model.json.family"), std::string::npos) << err;
  m["family"] = "conv2d";
  err = verify_error([&] { check_model(m, shapes); });
  EXPECT_NE(err.find("unknown decision family \"conv2d\""), std::string::npos) << err;
  json g = read_json(w.model / "model.json");
  EXPECT_EQ(model_family(g), kGemmFamily);
  g["family"] = "gemm";  // spelled out in model.json: the same model
  EXPECT_NO_THROW(check_model(g, check_weights(slurp(w.model / "weights.msgpack"))));
}

// The shipped GEMM bundle is the golden: it verifies against the release root key as
// a gemm bundle, and make_bundle() rebuilds exactly its signed block (no "family"),
// so every GEMM bundle signed before families existed stays valid.
TEST(Families, ShippedGemmBundleIsUnchanged) {
  const fs::path pkg = fs::path(DIODE_SHIPPED_BUNDLES);
  const fs::path dir = pkg / "nvidia-h200-144gb" / "9";
  ASSERT_TRUE(fs::exists(dir / "bundle.json")) << dir;
  std::string hex = slurp(pkg / "root.pub");
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == ' ')) hex.pop_back();
  const BundleMeta m = verify_bundle_dir(dir.string(), PublicKey::from_hex(hex), std::time(nullptr), kGemmFamily);
  EXPECT_EQ(m.family, kGemmFamily);
  EXPECT_EQ(m.version, 9u);
  const json shipped = read_json(dir / "bundle.json")["signed"];
  EXPECT_FALSE(shipped.contains("family"));
  const json model = read_json(dir / "model.json");
  std::vector<std::string> torch;
  for (const auto& t : shipped["tested_torch_versions"]) torch.push_back(t.get<std::string>());
  const json rebuilt = make_bundle(model,
                                   {{"model.json", slurp(dir / "model.json")},
                                    {"weights.msgpack", slurp(dir / "weights.msgpack")}},
                                   shipped["version"].get<uint64_t>(), parse_time(shipped["created"].get<std::string>(), "created"),
                                   parse_time(shipped["expires"].get<std::string>(), "expires"), torch);
  EXPECT_EQ(canonical(rebuilt), canonical(shipped));
}

TEST(Families, PullEachFamilyIntoItsOwnCachePlace) {
  FamilyWorld w;
  w.publish_now();
  w.publish_family();
  w.publish_family();  // scaled_mm version 2; gemm stays at 1
  Hub hub(w.registry);
  PullOptions o = pull_options(w, hub.url(), w.now);
  const PullResult g = pull(o);
  EXPECT_EQ(fs::path(g.path), w.cache / kHw / "1");
  o.family = kFam;
  const PullResult f = pull(o);
  EXPECT_EQ(fs::path(f.path), w.cache / kHw / "families" / kFam / "2");
  EXPECT_EQ(f.version, 2u);
  EXPECT_EQ(read_json(w.cache / kHw / "families" / kFam / "state.json")["family"], kFam);
  EXPECT_FALSE(read_json(w.cache / kHw / "state.json").contains("family"));
  // Offline, each family from its own place.
  o.hub_url.clear();
  EXPECT_EQ(fs::path(pull(o).path), w.cache / kHw / "families" / kFam / "2");
  o.family = kGemmFamily;
  EXPECT_EQ(fs::path(pull(o).path), w.cache / kHw / "1");

  const auto cached = list_cache(w.cache.string());
  ASSERT_EQ(cached.size(), 2u);
  EXPECT_EQ(cached[0].family, kGemmFamily);
  EXPECT_EQ(cached[0].version, 1u);
  EXPECT_EQ(cached[1].family, kFam);
  EXPECT_EQ(cached[1].version, 2u);
  EXPECT_EQ(fs::path(cached[1].path), w.cache / kHw / "families" / kFam / "2");

  EXPECT_EQ(list_registry(w.registry.string()).size(), 1u);  // without families: what it always listed
  const auto reg = list_registry(w.registry.string(), false, SIZE_MAX, /*with_families=*/true);
  ASSERT_EQ(reg.size(), 2u);
  EXPECT_EQ(reg[0].family, kGemmFamily);
  EXPECT_EQ(reg[1].family, kFam);
  EXPECT_EQ(reg[1].current, 2u);
  EXPECT_EQ(reg[1].versions, (std::vector<uint64_t>{1, 2}));

  const SigningKeys keys = load_signing_keys(w.keys.string());
  EXPECT_EQ(refresh_index(w.registry.string(), kHw, keys, 7, w.now, kFam), 2u);
  EXPECT_EQ(read_json(w.fam_dir() / "index.json")["index"]["signed"]["family"], kFam);
  EXPECT_THROW(refresh_index(w.registry.string(), kHw, keys, 7, w.now, "conv2d"), std::invalid_argument);
}

TEST(Families, AnotherFamilysIndexOrBundleIsRefused) {
  FamilyWorld w;
  w.publish_now();
  Hub hub(w.registry);
  PullOptions o = pull_options(w, hub.url(), w.now);
  o.family = kFam;
  // Nothing published for the family: the hub answers 404.
  EXPECT_THROW(pull(o), HttpError);
  // A hub that serves the GEMM index and bundle at the family's place: the signed
  // index says gemm, so nothing is installed.
  fs::create_directories(w.fam_dir());
  fs::copy(w.hw_dir() / "index.json", w.fam_dir() / "index.json");
  fs::copy(w.hw_dir() / "1", w.fam_dir() / "1", fs::copy_options::recursive);
  const std::string err = verify_error([&] { pull(o); });
  EXPECT_NE(err.find("index.json: is of decision family gemm, not the requested scaled_mm"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(w.cache / kHw));
  o.family = "conv2d";
  EXPECT_THROW(pull(o), std::invalid_argument);
}
