#include <gtest/gtest.h>

#include "diode/hardware.h"
#include "diode/hardware_plausibility.h"
#include "diode/io.h"

#include <nlohmann/json.hpp>

namespace diode {
namespace {

HardwareId hw(const std::string& vendor, const std::string& name, double gib) {
  HardwareId h;
  h.vendor = vendor;
  h.device_name = name;
  h.memory_bytes = static_cast<uint64_t>(gib * double(1ull << 30));
  return h;
}

// The examples, and the names and keys below, are stated once in
// shared/schema/contracts.json ("hardware_key"); tests/python/test_hardware_key.py reads the same.
const nlohmann::json& key_schema() {
  static const nlohmann::json s = nlohmann::json::parse(io::read_file(DIODE_SCHEMA_FILE)).at("hardware_key");
  return s;
}

TEST(HardwareKey, DocumentedExamples) {
  ASSERT_GE(key_schema().at("examples").size(), 6u);
  for (const auto& ex : key_schema().at("examples")) {
    HardwareId h;
    h.vendor = ex.at("vendor");
    h.device_name = ex.at("device_name");
    h.memory_bytes = ex.at("memory_bytes");
    EXPECT_EQ(hardware_key(h), ex.at("key").get<std::string>()) << h.device_name;
  }
  // The schema's memory sizes are static_cast<uint64_t>(GiB * 2^30), as hw() makes them.
  EXPECT_EQ(hw("nvidia", "NVIDIA H100 80GB HBM3", 79.65).memory_bytes,
            key_schema().at("examples")[0].at("memory_bytes").get<uint64_t>());
}

TEST(HardwareKey, AlwaysValidShape) {
  for (const auto& name : key_schema().at("always_valid_device_names")) {
    std::string k = hardware_key(hw("Vendor X", name.get<std::string>(), 0));
    EXPECT_TRUE(is_valid_hardware_key(k)) << k;
  }
  for (const auto& k : key_schema().at("invalid_keys")) EXPECT_FALSE(is_valid_hardware_key(k)) << k;
  for (const auto& k : key_schema().at("valid_keys")) EXPECT_TRUE(is_valid_hardware_key(k)) << k;
}

// Issue 16, item 5: fingerprints no real device has are refused before they
// can become hardware keys ("nvidia-h100-8589934592gb", "nvidia-etc-80gb").
TEST(HardwarePlausibility, RefusesAbsurdFingerprints) {
  for (const HardwareId& ok : {hw("nvidia", "NVIDIA H100 80GB HBM3", 79.65), hw("nvidia", "NVIDIA A100-SXM4-80GB", 79.15),
                               hw("amd", "AMD Instinct MI300X", 191.98), hw("nvidia", "NVIDIA GeForce RTX 4090", 23.99),
                               hw("nvidia", "Tesla V100-SXM2-16GB", 15.77), hw("cpu", "AMD EPYC 9654 96-Core Processor", 0)})
    EXPECT_EQ(implausible_hardware(ok), "") << ok.device_name;
  HardwareId h = hw("nvidia", "NVIDIA H100 80GB HBM3", 8589934592.0);  // 8 EiB
  EXPECT_NE(implausible_hardware(h).find("memory_bytes"), std::string::npos);
  h = hw("nvidia", "NVIDIA H100 80GB HBM3", 0.5);
  EXPECT_NE(implausible_hardware(h).find("memory_bytes"), std::string::npos);
  h = hw("nvidia", "NVIDIA H100 80GB HBM3", 0);  // an accelerator must report its memory
  EXPECT_NE(implausible_hardware(h).find("memory_bytes"), std::string::npos);
  for (const char* name : {"../../etc", "NVIDIA ../../etc", "a/b", "", " NVIDIA H100", "NVIDIA H100 ", "12345",
                           "NVIDIA\nH100", "NVIDIA H100\x01"}) {
    h = hw("nvidia", name, 79.65);
    EXPECT_NE(implausible_hardware(h).find("device_name"), std::string::npos) << name;
  }
  h = hw("nvidia", std::string(97, 'A'), 79.65);
  EXPECT_NE(implausible_hardware(h).find("device_name"), std::string::npos);
  h = hw("NVIDIA/..", "NVIDIA H100", 79.65);
  EXPECT_NE(implausible_hardware(h).find("vendor"), std::string::npos);
  h = hw("nvidia", "NVIDIA H100 80GB HBM3", 79.65);
  h.sm_count = 1u << 20;
  EXPECT_NE(implausible_hardware(h).find("sm_count"), std::string::npos);
  h.sm_count = 132;
  h.compute_capability = "9.0; rm -rf /";
  EXPECT_NE(implausible_hardware(h).find("compute_capability"), std::string::npos);
}

}  // namespace
}  // namespace diode
