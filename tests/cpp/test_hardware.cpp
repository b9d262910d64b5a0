#include <gtest/gtest.h>

#include "diode/hardware.h"

namespace diode {
namespace {

HardwareId hw(const std::string& vendor, const std::string& name, double gib) {
  HardwareId h;
  h.vendor = vendor;
  h.device_name = name;
  h.memory_bytes = static_cast<uint64_t>(gib * double(1ull << 30));
  return h;
}

TEST(HardwareKey, DocumentedExamples) {
  EXPECT_EQ(hardware_key(hw("nvidia", "NVIDIA H100 80GB HBM3", 79.65)), "nvidia-h100-80gb");
  EXPECT_EQ(hardware_key(hw("nvidia", "NVIDIA H100 PCIe", 79.2)), "nvidia-h100-pcie-80gb");
  EXPECT_EQ(hardware_key(hw("nvidia", "NVIDIA A100-SXM4-80GB", 79.15)), "nvidia-a100-sxm4-80gb");
  EXPECT_EQ(hardware_key(hw("nvidia", "NVIDIA A100-SXM4-40GB", 39.4)), "nvidia-a100-sxm4-40gb");
  EXPECT_EQ(hardware_key(hw("nvidia", "NVIDIA H200", 140.4)), "nvidia-h200-144gb");
  EXPECT_EQ(hardware_key(hw("amd", "AMD Instinct MI300X", 192.0)), "amd-instinct-mi300x-192gb");
}

TEST(HardwareKey, AlwaysValidShape) {
  for (const char* name : {"", "---", "Weird  GPU!! 9000", "ÄÖÜ card"}) {
    std::string k = hardware_key(hw("Vendor X", name, 0));
    EXPECT_TRUE(is_valid_hardware_key(k)) << k;
  }
  EXPECT_FALSE(is_valid_hardware_key("../etc"));
  EXPECT_FALSE(is_valid_hardware_key("a--b"));
  EXPECT_FALSE(is_valid_hardware_key(""));
}

}  // namespace
}  // namespace diode
