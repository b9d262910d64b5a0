#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

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

// A reader must see one whole version of a file that a writer keeps replacing by rename
// (the registry's index.json under parallel publishes): never the new file cut to the
// old one's size, which a stat of the path followed by a second open can produce.
TEST(Io, ReadDuringAtomicReplaceSeesOneWholeVersion) {
  auto dir = std::filesystem::temp_directory_path() / ("diode_io_race_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "index.json").string();
  const std::string small(100, 'a'), large(100000, 'b');
  io::write_file_atomic(path, small);
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i, ++writes) io::write_file_atomic(path, i % 2 ? small : large);
  });
  int torn = 0, reads = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < until || writes.load() < 20) {
    ++reads;
    try {
      const std::string got = io::read_file(path);
      if (got != small && got != large) ++torn;
    } catch (const std::runtime_error&) {  // the old stat-then-open read: "short read"
      ++torn;
    }
  }
  stop = true;
  writer.join();
  EXPECT_EQ(torn, 0) << "of " << reads << " reads during " << writes.load() << " replaces";
  EXPECT_GT(reads, 0);
  std::filesystem::remove_all(dir);
}

TEST(Io, ReadRefusesWhatIsNotARegularFile) {
  auto dir = std::filesystem::temp_directory_path() / ("diode_io_dir_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_THROW(io::read_file(dir.string()), std::runtime_error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace diode
