// libFuzzer target for every wire decoder: the first input byte picks the
// decoder, the rest is the message. Any exception other than WireError, any
// crash, leak or UB report is a bug. A decoded message must survive a round
// trip: its canonical encoding decodes to the same value and re-encodes to the
// same bytes. (Input may use non-shortest integer forms, which msgpack allows;
// only the encoder is canonical.)
#include <cstdint>
#include <string_view>

#include "diode/dataset.h"
#include "diode/wire.h"

using namespace diode;

template <typename T, typename Decode>
void round_trip(const T& v, Decode decode) {
  const std::string canonical = wire::encode(v);
  const T again = decode(canonical);
  if (!(again == v) || wire::encode(again) != canonical) __builtin_trap();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view msg(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 7) {
      case 0: round_trip(wire::decode_hardware(msg), wire::decode_hardware); break;
      case 1: round_trip(wire::decode_problem(msg), wire::decode_problem); break;
      case 2: round_trip(wire::decode_config(msg), wire::decode_config); break;
      case 3: round_trip(wire::decode_record(msg), wire::decode_record); break;
      case 4: round_trip(wire::decode_shard(msg), wire::decode_shard); break;
      case 5: { (void)wire::decode_dataset(msg); break; }
      case 6: { (void)wire::peek_kind(msg); break; }
    }
  } catch (const WireError&) {
  }
  return 0;
}
