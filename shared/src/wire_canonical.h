// Shortest msgpack encoding sizes, used by the shard decoder to tell whether
// the bytes it just parsed are already the canonical encoding
// (docs/wire-format.md, "Canonical encoding rules") without re-encoding them.
//
// Why counting sizes is enough. The decoder adds, for every msgpack item it
// parses, the size of the shortest encoding of that item's value (the
// functions below), and flags the two forms that can be shorter than or as
// short as the canonical one while holding the same logical value:
//   * float32 (5 bytes; canonical floats are always float64, 9 bytes), and
//   * a signed-integer form (int8..int64, 0xd0..0xd3) holding a value >= 0
//     (canonical non-negative integers use fixint/uint8..uint64; int16 300 is
//     as long as uint16 300).
// Every other msgpack form of a value is at least as long as the shortest
// one, and within each family (fixint < uint8 < uint16 < ..., fixstr < str8 <
// ..., fixarray < array16 < array32, bin8 < bin16 < bin32, negative fixint <
// int8 < ...) the shortest form is unique. So if nothing was flagged and the
// sum of shortest sizes equals the message length, every item is in its
// unique shortest form, which is exactly the form our encoders (msgpack-cxx's
// packer) and Python's msgpack write. The decoder's schema pins everything
// else a re-encoding could change: exact array lengths and field order, the
// `extra` keys strictly sorted, status strings that round-trip exactly, and
// float64 bits copied as they are. Hence canonical input bytes == encode(decode(bytes)).
#pragma once

#include <cstddef>
#include <cstdint>

namespace diode::wire::canonical {

// fixint, uint8, uint16, uint32, uint64.
constexpr size_t uint_size(uint64_t v) {
  return v < 128 ? 1 : v < 256 ? 2 : v < 65536 ? 3 : v <= 0xffffffffu ? 5 : 9;
}
// For v < 0: negative fixint, int8, int16, int32, int64.
constexpr size_t negative_int_size(int64_t v) {
  return v >= -32 ? 1 : v >= -128 ? 2 : v >= -32768 ? 3 : v >= INT32_MIN ? 5 : 9;
}
// Header of a str of n bytes: fixstr, str8, str16, str32.
constexpr size_t str_header(uint32_t n) { return n < 32 ? 1 : n < 256 ? 2 : n < 65536 ? 3 : 5; }
// Header of a bin of n bytes: bin8, bin16, bin32.
constexpr size_t bin_header(uint32_t n) { return n < 256 ? 2 : n < 65536 ? 3 : 5; }
// Header of an array or map of n elements (pairs): fix, 16, 32.
constexpr size_t container_header(uint32_t n) { return n < 16 ? 1 : n < 65536 ? 3 : 5; }

inline constexpr size_t kFloat64Size = 9;

}  // namespace diode::wire::canonical
