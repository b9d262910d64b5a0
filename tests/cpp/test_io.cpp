#include <gtest/gtest.h>

#include <filesystem>

#include "diode/io.h"

namespace diode {
namespace {

TEST(Io, AtomicWriteReplacesWholeFile) {
  auto dir = std::filesystem::temp_directory_path() / ("diode_io_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "f.bin").string();
  io::write_file_atomic(path, "first");
  io::write_file_atomic(path, "second, longer");
  EXPECT_EQ(io::read_file(path), "second, longer");
  EXPECT_THROW(io::read_file(path, 4), std::runtime_error);
  EXPECT_THROW(io::read_file((dir / "missing").string()), std::runtime_error);
  for (auto& e : std::filesystem::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "f.bin");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace diode
