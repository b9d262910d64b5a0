#include "gpu.h"

#include <array>
#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace diode::agent {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string sm_arch(const std::string& cc) {
  std::string a = "sm_";
  for (char c : cc)
    if (c != '.') a += c;
  return a;
}

}  // namespace

std::vector<HardwareId> parse_nvidia_smi_csv(const std::string& csv) {
  std::vector<HardwareId> out;
  std::istringstream lines(csv);
  std::string line;
  while (std::getline(lines, line)) {
    if (trim(line).empty()) continue;
    std::vector<std::string> cols;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) cols.push_back(trim(cell));
    if (cols.size() != 5) throw std::runtime_error("nvidia-smi: unexpected line '" + line + "'");
    HardwareId h;
    h.vendor = "nvidia";
    h.device_name = cols[1];
    try {
      h.memory_bytes = std::stoull(cols[2]) * (1ull << 20);
    } catch (const std::exception&) {
      throw std::runtime_error("nvidia-smi: bad memory.total '" + cols[2] + "'");
    }
    h.compute_capability = cols[3];
    h.arch = sm_arch(cols[3]);
    h.driver_version = cols[4];
    h.runtime_version = "cuda";
    h.torch_version = "unknown";  // the collector reports the real versions in its shards
    h.triton_version = "unknown";
    if (h.device_name.empty()) throw std::runtime_error("nvidia-smi: empty device name");
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<HardwareId> detect_nvidia_gpus(const std::string& nvidia_smi) {
  std::string cmd = nvidia_smi +
                    " --query-gpu=index,name,memory.total,compute_cap,driver_version --format=csv,noheader,nounits"
                    " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) throw std::runtime_error("cannot run nvidia-smi");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0 && out.size() < (1u << 20)) out.append(buf.data(), n);
  int rc = pclose(p.release());
  if (rc != 0) throw std::runtime_error("nvidia-smi failed (no NVIDIA driver? use --fake-gpus for tests)");
  auto gpus = parse_nvidia_smi_csv(out);
  if (gpus.empty()) throw std::runtime_error("nvidia-smi reports no GPU");
  return gpus;
}

std::vector<HardwareId> fake_gpus(const FakeGpuSpec& spec) {
  std::vector<HardwareId> out;
  for (int i = 0; i < spec.count; ++i) {
    HardwareId h;
    h.vendor = spec.device_name.find("AMD") != std::string::npos ? "amd" : "nvidia";
    h.device_name = spec.device_name;
    h.compute_capability = spec.compute_capability;
    h.arch = h.vendor == "amd" ? spec.compute_capability : sm_arch(spec.compute_capability);
    h.memory_bytes = static_cast<uint64_t>(spec.memory_gib * static_cast<double>(1ull << 30));
    h.sm_count = 132;
    h.driver_version = "fake";
    h.runtime_version = "fake";
    h.torch_version = "unknown";
    h.triton_version = "unknown";
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace diode::agent
