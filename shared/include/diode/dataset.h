// Datasets: many shards of one hardware. On disk a dataset is either
//   * one file holding a wire message of kind "dataset" (export format), or
//   * one shard message file, or
//   * a directory of such files (*.msgpack, optionally gzip-compressed *.gz),
// see docs/wire-format.md#dataset.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "diode/types.h"

namespace diode {

struct Dataset {
  std::string hardware_key;  // every shard's hardware_key(shard.hardware) equals this
  std::vector<Shard> shards;

  size_t record_count() const;
  size_t problem_count() const;  // distinct problems over all shards
};

namespace wire {
// A "dataset" message: [hardware_key, [shard message as bin, ...]]; each shard
// stays independently verifiable by its own hash.
std::string encode(const Dataset& d);
Dataset decode_dataset(std::string_view bytes);
}  // namespace wire

namespace gz {
// gzip (RFC 1952) through zlib. Decompression stops with an error past
// max_out bytes, so a small hostile file cannot expand without bound.
std::string compress(std::string_view data, int level = 6);
std::string decompress(std::string_view data, size_t max_out);
bool looks_gzipped(std::string_view data);
}  // namespace gz

// Loads a dataset from a file or a directory (see above). Shards of another
// hardware than the first one are an error. Throws WireError / runtime_error
// naming the file. If `origins` is given, (*origins)[i] is the file shard i
// was read from (for messages that must name the file).
Dataset load_dataset(const std::string& path, std::vector<std::string>* origins = nullptr);

// Writes a dataset message, gzip-compressed when path ends in ".gz", atomically
// (creating missing parent directories).
void save_dataset(const std::string& path, const Dataset& d);

// Reads one shard file (.msgpack or .msgpack.gz).
Shard load_shard_file(const std::string& path);

}  // namespace diode
