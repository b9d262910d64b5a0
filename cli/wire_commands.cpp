// `diode shard`, `diode wire`, `diode hardware`, `diode features`: inspect and
// convert the core types from the command line.
#include <fstream>
#include <iostream>
#include <map>

#include "commands.h"
#include "diode/dataset.h"
#include "diode/features.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/json.h"
#include "diode/sha256.h"
#include "diode/wire.h"

namespace diode::cli {

namespace {

nlohmann::json read_json(const std::string& path) {
  std::string text = io::read_file(path, 64u << 20);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw WireError(path + ": invalid JSON: " + e.what());
  }
}

void print_shard_summary(const Shard& s) {
  std::map<std::string, size_t> by_status;
  for (const auto& r : s.records) by_status[to_string(r.status)]++;
  std::cout << "shard     " << s.id << "\n"
            << "sweep     " << (s.sweep_id.empty() ? "-" : s.sweep_id) << "\n"
            << "hardware  " << hardware_key(s.hardware) << " (" << s.hardware.device_name << ")\n"
            << "producer  " << s.producer.name << " via " << s.producer.runner << "\n"
            << "wire      version " << s.wire_version << "\n"
            << "method    " << (s.method.timing.empty() ? "unrecorded" : s.method.timing) << " by "
            << (s.method.collector.empty() ? "unrecorded" : s.method.collector) << "\n"
            << "problems  " << s.problems.size();
  if (!s.problem_wall_s.empty()) {
    double total = 0;
    for (double w : s.problem_wall_s) total += w;
    std::cout << "  wall " << total << " s in all";
  }
  std::cout << "\n"
            << "records   " << s.records.size();
  for (const auto& [status, n] : by_status) std::cout << "  " << status << "=" << n;
  std::cout << "\nsha256    " << to_hex(s.sha256) << " (verified)\n";
}

}  // namespace

void register_wire_commands(CLI::App& app) {
  auto* shard = app.add_subcommand("shard", "Inspect and convert timing shards");
  shard->require_subcommand(1);

  auto* show = shard->add_subcommand("show", "Decode a shard (.msgpack or .msgpack.gz), verify it and print a summary");
  static std::string show_path;
  static bool show_json = false;
  show->add_option("file", show_path, "Shard file (.msgpack)")->required();
  show->add_flag("--json", show_json, "Print the whole shard as JSON");
  show->callback([] {
    Shard s = load_shard_file(show_path);  // .msgpack or .msgpack.gz
    if (show_json) std::cout << to_json(s).dump(1) << "\n";
    else print_shard_summary(s);
  });

  auto* from_json = shard->add_subcommand("from-json", "Encode a JSON shard as a sealed msgpack shard");
  static std::string fj_in, fj_out;
  from_json->add_option("input", fj_in, "JSON file")->required();
  from_json->add_option("output", fj_out, "msgpack file to write")->required();
  from_json->callback([] {
    Shard s = shard_from_json(read_json(fj_in));
    io::write_file_atomic(fj_out, wire::encode(s));
    std::cout << "wrote " << fj_out << " (" << s.records.size() << " records, sha256 " << to_hex(s.sha256) << ")\n";
  });

  auto* wire_cmd = app.add_subcommand("wire", "Wire-format tools");
  wire_cmd->require_subcommand(1);
  auto* golden = wire_cmd->add_subcommand("golden", "Encode tests/golden/cases.json into one .msgpack per type");
  static std::string g_cases, g_out;
  golden->add_option("--cases", g_cases, "cases.json")->required();
  golden->add_option("--out", g_out, "Output directory")->required();
  golden->callback([] {
    auto cases = read_json(g_cases);
    auto put = [](const std::string& name, const std::string& bytes) {
      io::write_file_atomic(g_out + "/" + name + ".msgpack", bytes);
      std::cout << name << ".msgpack " << bytes.size() << " bytes\n";
    };
    put("hardware", wire::encode(hardware_from_json(cases.at("hardware"))));
    put("problem", wire::encode(problem_from_json(cases.at("problem"))));
    put("config", wire::encode(config_from_json(cases.at("config"))));
    put("record", wire::encode(record_from_json(cases.at("record"))));
    Shard golden_shard = shard_from_json(cases.at("shard"));
    put("shard", wire::encode(golden_shard));
    // The same shard in wire version 1 (no method, no wall times): the
    // compatibility case both languages must still decode and re-encode.
    put("shard_v1", wire::encode(shard_from_json(cases.at("shard_v1"))));

    // Feature golden vectors: every problem of the shard case with every config
    // of the cases, raw (unnormalised) under the default spec.
    FeatureSpec spec;
    std::vector<KernelConfig> configs{config_from_json(cases.at("config")),
                                      record_from_json(cases.at("record")).config};
    for (const auto& r : golden_shard.records) configs.push_back(r.config);
    std::vector<Problem> problems = golden_shard.problems;
    problems.push_back(problem_from_json(cases.at("problem")));
    problems.push_back(record_from_json(cases.at("record")).problem);
    nlohmann::json out{{"spec", spec.to_json()}, {"cases", nlohmann::json::array()}};
    for (const auto& p : problems) {
      if (family_of(p.op) != spec.family) continue;  // other families have their own file below
      for (const auto& c : configs) {
        std::vector<float> raw;
        raw_features(spec, p, c, raw);
        out["cases"].push_back({{"problem", to_json(p)}, {"config", to_json(c)}, {"raw", raw}});
      }
    }
    io::write_file_atomic(g_out + "/features.json", out.dump(1) + "\n");
    std::cout << "features.json " << out["cases"].size() << " cases\n";
    // The scaled_mm family's golden vectors: each of those GEMM problems' sizes as an FP8
    // _scaled_mm (tensor-wise and row-wise scales) with each config, with and without
    // fast accumulation, raw under the default spec of family scaled_mm.
    FeatureSpec fp8;
    fp8.family = "scaled_mm";
    nlohmann::json out8{{"spec", fp8.to_json()}, {"cases", nlohmann::json::array()}};
    for (const auto& g : problems) {
      if (family_of(g.op) != "gemm") continue;
      for (const char* scale : {"tensor", "row"}) {
        Problem p;
        p.op = "scaled_mm";
        p.batch = 1, p.m = g.m, p.n = g.n, p.k = g.k;
        p.dtype_a = p.dtype_b = "float8_e4m3fn";
        p.dtype_out = "bfloat16";
        p.trans_a = false, p.trans_b = true;
        p.scale = scale;
        for (KernelConfig c : configs)
          for (bool fast : {false, true}) {
            c.use_fast_accum = fast;
            std::vector<float> raw;
            raw_features(fp8, p, c, raw);
            out8["cases"].push_back({{"problem", to_json(p)}, {"config", to_json(c)}, {"raw", raw}});
          }
      }
    }
    io::write_file_atomic(g_out + "/features_scaled_mm.json", out8.dump(1) + "\n");
    std::cout << "features_scaled_mm.json " << out8["cases"].size() << " cases\n";
  });

  auto* hw = app.add_subcommand("hardware", "Hardware identities");
  hw->require_subcommand(1);
  auto* key = hw->add_subcommand("key", "Print the canonical hardware key of a HardwareId JSON file");
  static std::string key_path;
  key->add_option("file", key_path, "HardwareId as JSON")->required();
  key->callback([] { std::cout << hardware_key(hardware_from_json(read_json(key_path))) << "\n"; });

  auto* feat = app.add_subcommand("features", "Print the feature vector of a (problem, config) pair");
  static std::string f_problem, f_config;
  feat->add_option("--problem", f_problem, "Problem JSON file")->required();
  feat->add_option("--config", f_config, "KernelConfig JSON file")->required();
  feat->callback([] {
    const Problem p = problem_from_json(read_json(f_problem));
    FeatureSpec spec;  // the default spec of the problem's decision family
    if (family_of(p.op) == "scaled_mm") spec.family = "scaled_mm";
    auto names = spec.names();
    auto v = features(spec, p, config_from_json(read_json(f_config)));
    for (size_t i = 0; i < v.size(); ++i) std::cout << names[i] << "\t" << v[i] << "\n";
  });
}

}  // namespace diode::cli
