// libFuzzer target for the checks a client runs on a downloaded bundle's model
// directory before it loads it (docs/model-format.md): model.json's fields (the
// architecture with its members, cascade and pre-filter, the feature spec, the
// dataset) and weights.msgpack's tensors. The first byte picks the file.
#include <cstdint>
#include <string_view>

#include "diode/bundle/model_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      auto j = nlohmann::json::parse(rest.begin(), rest.end(), nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return 0;
      // No tensors: every field of model.json is checked before the tensor comparison.
      diode::bundle::check_model(j, {});
    } else {
      (void)diode::bundle::check_weights(rest);
    }
  } catch (const diode::bundle::VerifyError&) {
  }
  return 0;
}
