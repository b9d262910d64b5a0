// The shared decoder corpus (tests/golden/decoder_corpus): the C++ decoder must give
// every message the verdict expect.json records; tests/python/test_decoder_corpus.py
// holds the Python decoder to the same file, so the two agree on accept/reject.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "diode/io.h"
#include "diode/wire.h"
#include "test_util.h"

namespace diode {
namespace {

// Decodes one message of any kind; false when the decoder refuses it.
bool accepts(const std::string& bytes) {
  try {
    const std::string kind = wire::peek_kind(bytes);
    if (kind == "hardware") wire::decode_hardware(bytes);
    else if (kind == "problem") wire::decode_problem(bytes);
    else if (kind == "config") wire::decode_config(bytes);
    else if (kind == "record") wire::decode_record(bytes);
    else if (kind == "shard") wire::decode_shard(bytes);
    else return false;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

TEST(DecoderCorpus, CppVerdictsMatchExpectations) {
  const std::string dir = test::golden_path("decoder_corpus");
  const auto expect = nlohmann::json::parse(io::read_file(dir + "/expect.json"));
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "expect.json") continue;
    ++files;
    ASSERT_TRUE(expect.contains(name)) << name << " has no verdict in expect.json";
    const bool want = expect[name]["expect"] == "accept";
    EXPECT_EQ(accepts(io::read_file(e.path().string())), want)
        << name << ": " << expect[name]["why"].get<std::string>();
  }
  EXPECT_EQ(files, expect.size());
}

}  // namespace
}  // namespace diode
