// model.json `provenance` (issue 54): the torch and Triton versions of the training shards.
#include <gtest/gtest.h>

#include <filesystem>

#include "diode/error.h"
#include "diode/io.h"
#include "model_format.h"
#include "model_test_util.h"
#include "synth.h"

using namespace diode;
using namespace diode::models;
using diode::models::test::random_model;
using diode::models::test::temp_dir;

namespace {
Dataset shards_with_versions() {
  SynthOptions o;
  o.problems = 12, o.shards = 4, o.config_stride = 50;
  Dataset d = make_synthetic_dataset(o);
  const char* torch[] = {"2.11.0+cu130", "2.11.0+cu130", "2.10.0+cu128", ""};
  const char* triton[] = {"3.6.0", "3.6.0", "3.5.0", ""};
  for (size_t i = 0; i < d.shards.size(); ++i) {
    d.shards[i].hardware.torch_version = torch[i];
    d.shards[i].hardware.triton_version = triton[i];
  }
  return d;
}
}  // namespace

TEST(ModelProvenance, SetsOfTheShardsVersions) {
  Dataset d = shards_with_versions();
  const auto p = dataset_provenance(d);
  EXPECT_EQ(p["torch_versions"], nlohmann::json({"2.10.0+cu128", "2.11.0+cu130"}));  // sorted, unique, no ""
  EXPECT_EQ(p["triton_versions"], nlohmann::json({"3.5.0", "3.6.0"}));
  EXPECT_FALSE(p.contains("templates"));  // not on the wire: never invented

  // A community shard counts only when the training uses community data; a shard without
  // records contributes nothing.
  Shard c = d.shards[0];
  c.id = "community";
  c.producer.runner = "community";
  c.hardware.torch_version = "2.12.0";
  Shard empty = d.shards[0];
  empty.id = "empty";
  empty.records.clear();
  empty.hardware.triton_version = "9.9.9";
  d.shards.push_back(c);
  d.shards.push_back(empty);
  EXPECT_EQ(dataset_provenance(d)["torch_versions"], nlohmann::json({"2.10.0+cu128", "2.11.0+cu130"}));
  EXPECT_EQ(dataset_provenance(d, true)["torch_versions"],
            nlohmann::json({"2.10.0+cu128", "2.11.0+cu130", "2.12.0"}));
  EXPECT_EQ(dataset_provenance(d, true)["triton_versions"], nlohmann::json({"3.5.0", "3.6.0"}));
}

TEST(ModelProvenance, ExtraDatasetsMergeIn) {
  const Dataset d = shards_with_versions();
  SynthOptions o;
  o.problems = 4, o.shards = 1, o.config_stride = 50;
  Dataset x = make_synthetic_dataset(o);
  x.shards[0].hardware.torch_version = "2.9.1";
  x.shards[0].hardware.triton_version = "3.6.0";
  nlohmann::json p = dataset_provenance(d);
  add_provenance(p, x);
  EXPECT_EQ(p["torch_versions"], nlohmann::json({"2.10.0+cu128", "2.11.0+cu130", "2.9.1"}));
  EXPECT_EQ(p["triton_versions"], nlohmann::json({"3.5.0", "3.6.0"}));
}

TEST(ModelProvenance, ModelJsonCarriesItAndReadsItBack) {
  ModelDir m = random_model(8, 1, 5);
  EXPECT_FALSE(model_json(m).contains("provenance"));  // not recorded: left out, as older models
  m.provenance = dataset_provenance(shards_with_versions());
  const nlohmann::json j = model_json(m);
  ASSERT_TRUE(j.contains("provenance"));
  EXPECT_EQ(j["provenance"]["torch_versions"], nlohmann::json({"2.10.0+cu128", "2.11.0+cu130"}));
  const std::string dir = temp_dir("prov");
  save_model_dir(dir, m);
  const auto on_disk = nlohmann::json::parse(io::read_file(dir + "/model.json"));
  EXPECT_EQ(on_disk["provenance"], m.provenance);
  EXPECT_EQ(load_model_dir(dir).provenance, m.provenance);
  // An ensemble keeps its members' (one dataset, one provenance).
  ModelDir m2 = random_model(8, 1, 6);
  m2.dataset = m.dataset;
  m2.provenance = m.provenance;
  EXPECT_EQ(make_ensemble({m, m2}, 1).provenance, m.provenance);
  // Not an object: refused.
  auto bad = on_disk;
  bad["provenance"] = "2.11.0";
  io::write_file_atomic(dir + "/model.json", bad.dump());
  EXPECT_THROW(load_model_dir(dir), WireError);
  std::filesystem::remove_all(dir);
}
