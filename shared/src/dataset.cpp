#include "diode/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <msgpack.hpp>
#include <set>

#include "diode/error.h"
#include "diode/hardware.h"
#include "diode/io.h"
#include "diode/wire.h"

namespace diode {

size_t Dataset::record_count() const {
  size_t n = 0;
  for (const auto& s : shards) n += s.records.size();
  return n;
}

size_t Dataset::problem_count() const {
  std::set<Problem> seen;
  for (const auto& s : shards) seen.insert(s.problems.begin(), s.problems.end());
  return seen.size();
}

namespace wire {

std::string encode(const Dataset& d) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack_str(5).pack_str_body("diode", 5);
  pk.pack_uint64(kVersion);
  pk.pack_str(7).pack_str_body("dataset", 7);
  pk.pack_array(2);
  pk.pack_str(static_cast<uint32_t>(d.hardware_key.size())).pack_str_body(d.hardware_key.data(), static_cast<uint32_t>(d.hardware_key.size()));
  pk.pack_array(static_cast<uint32_t>(d.shards.size()));
  for (const auto& s : d.shards) {
    std::string bytes = encode(s);
    pk.pack_bin(static_cast<uint32_t>(bytes.size())).pack_bin_body(bytes.data(), static_cast<uint32_t>(bytes.size()));
  }
  return std::string(buf.data(), buf.size());
}

Dataset decode_dataset(std::string_view bytes) {
  if (bytes.size() > kMaxMessageBytes) throw WireError("dataset: larger than the message limit");
  msgpack::object_handle oh;
  try {
    // Shards travel as opaque bin blobs here and are decoded (with their own
    // limits) one by one below.
    msgpack::unpack_limit limits(1'000'000, 0, kMaxString, kMaxMessageBytes, 0, 4);
    size_t off = 0;
    oh = msgpack::unpack(bytes.data(), bytes.size(), off, nullptr, nullptr, limits);
    if (off != bytes.size()) throw WireError("dataset: trailing bytes");
  } catch (const WireError&) {
    throw;
  } catch (const std::exception& e) {
    throw WireError(std::string("dataset: malformed msgpack (") + e.what() + ")");
  }
  const auto& top = oh.get();
  auto arr = [](const msgpack::object& o, uint32_t n, const char* path) {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != n)
      throw WireError(std::string(path) + ": expected array of " + std::to_string(n));
    return o.via.array.ptr;
  };
  const auto* f = arr(top, 4, "message");
  if (f[0].type != msgpack::type::STR || std::string_view(f[0].via.str.ptr, f[0].via.str.size) != "diode")
    throw WireError("message: not a diode message (bad magic)");
  if (f[1].type != msgpack::type::POSITIVE_INTEGER)
    throw WireError("message.version: expected uint");
  if (f[1].via.u64 < kMinVersion || f[1].via.u64 > kVersion)
    throw WireError("message.version: unsupported wire version " + std::to_string(f[1].via.u64));
  if (f[2].type != msgpack::type::STR || std::string_view(f[2].via.str.ptr, f[2].via.str.size) != "dataset")
    throw WireError("message: expected kind 'dataset'");
  const auto* body = arr(f[3], 2, "dataset");
  if (body[0].type != msgpack::type::STR) throw WireError("dataset.hardware_key: expected str");
  Dataset d;
  d.hardware_key.assign(body[0].via.str.ptr, body[0].via.str.size);
  if (!is_valid_hardware_key(d.hardware_key)) throw WireError("dataset.hardware_key: not a valid hardware key");
  if (body[1].type != msgpack::type::ARRAY) throw WireError("dataset.shards: expected array");
  for (uint32_t i = 0; i < body[1].via.array.size; ++i) {
    const auto& o = body[1].via.array.ptr[i];
    std::string path = "dataset.shards[" + std::to_string(i) + "]";
    if (o.type != msgpack::type::BIN) throw WireError(path + ": expected bin");
    try {
      d.shards.push_back(decode_shard(std::string_view(o.via.bin.ptr, o.via.bin.size)));
    } catch (const WireError& e) {
      throw WireError(path + ": " + e.what());
    }
    if (hardware_key(d.shards.back().hardware) != d.hardware_key)
      throw WireError(path + ": shard of hardware " + hardware_key(d.shards.back().hardware) +
                      " in a dataset of " + d.hardware_key);
  }
  return d;
}

}  // namespace wire

namespace gz {

bool looks_gzipped(std::string_view data) {
  return data.size() >= 2 && static_cast<uint8_t>(data[0]) == 0x1f && static_cast<uint8_t>(data[1]) == 0x8b;
}

std::string compress(std::string_view data, int level) {
  z_stream zs{};
  // windowBits 15 + 16: write a gzip header and trailer.
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib deflateInit2 failed");
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib deflate failed");
  out.resize(zs.total_out);
  return out;
}

std::string decompress(std::string_view data, size_t max_out) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) throw std::runtime_error("zlib inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char chunk[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof(chunk);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      throw WireError(std::string("gzip: corrupt or truncated data (") + (zs.msg ? zs.msg : "zlib error") + ")");
    }
    out.append(chunk, sizeof(chunk) - zs.avail_out);
    if (out.size() > max_out) {
      inflateEnd(&zs);
      throw WireError("gzip: expands past the limit of " + std::to_string(max_out) + " bytes");
    }
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw WireError("gzip: truncated data");
    }
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace gz

namespace {

std::string read_maybe_gz(const std::string& path) {
  std::string raw = io::read_file(path, wire::kMaxMessageBytes);
  return gz::looks_gzipped(raw) ? gz::decompress(raw, wire::kMaxMessageBytes) : raw;
}

void add_file(Dataset& d, const std::string& path, std::vector<std::string>* origins) {
  std::string bytes = read_maybe_gz(path);
  std::vector<Shard> shards;
  try {
    std::string kind = wire::peek_kind(bytes);
    if (kind == "shard") {
      shards.push_back(wire::decode_shard(bytes));
    } else if (kind == "dataset") {
      shards = wire::decode_dataset(bytes).shards;
    } else {
      throw WireError("message: a " + kind + ", not a shard or dataset");
    }
  } catch (const WireError& e) {
    throw WireError(path + ": " + e.what());
  }
  for (auto& s : shards) {
    std::string key = hardware_key(s.hardware);
    if (d.hardware_key.empty()) d.hardware_key = key;
    if (key != d.hardware_key)
      throw WireError(path + ": shard " + s.id + " is for " + key + ", the dataset for " + d.hardware_key);
    d.shards.push_back(std::move(s));
    if (origins) origins->push_back(path);
  }
}

}  // namespace

Shard load_shard_file(const std::string& path) {
  try {
    return wire::decode_shard(read_maybe_gz(path));
  } catch (const WireError& e) {
    throw WireError(path + ": " + e.what());
  }
}

Dataset load_dataset(const std::string& path, std::vector<std::string>* origins) {
  namespace fs = std::filesystem;
  Dataset d;
  if (fs::is_directory(path)) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(path)) {
      std::string name = e.path().filename().string();
      if (e.is_regular_file() && (name.ends_with(".msgpack") || name.ends_with(".msgpack.gz")))
        files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());  // deterministic order
    for (const auto& f : files) add_file(d, f, origins);
  } else {
    add_file(d, path, origins);
  }
  return d;
}

void save_dataset(const std::string& path, const Dataset& d) {
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::string bytes = wire::encode(d);
  if (path.ends_with(".gz")) bytes = gz::compress(bytes);
  io::write_file_atomic(path, bytes);
}

}  // namespace diode
