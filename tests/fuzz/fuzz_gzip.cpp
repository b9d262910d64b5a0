// libFuzzer target for gzip decompression (dataset files are untrusted).
#include <cstdint>
#include <string_view>

#include "diode/dataset.h"
#include "diode/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)diode::gz::decompress(std::string_view(reinterpret_cast<const char*>(data), size), 1 << 20);
  } catch (const diode::WireError&) {
  }
  return 0;
}
