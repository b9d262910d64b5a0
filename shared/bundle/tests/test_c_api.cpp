// The C ABI of libdiode_client.so, called as a C program (or ctypes) would.
#include "diode/bundle/diode_client.h"

#include <cstring>

#include "diode/bundle/client.h"
#include "fixture.h"

using namespace diode::bundle;
using namespace diode::bundle::testing;

TEST(CApi, PullVerifyAndErrorCodes) {
  World w;
  w.publish_now();
  Hub hub(w.registry);
  const std::string key = w.pinned().hex();
  char path[4096], err[1024];
  ASSERT_EQ(diode_client_pull(hub.url().c_str(), kHw, w.cache.c_str(), key.c_str(), path, sizeof path, err, sizeof err),
            DIODE_OK)
      << err;
  EXPECT_EQ(fs::path(path), w.cache / kHw / "1");
  EXPECT_STREQ(err, "");
  EXPECT_EQ(diode_client_verify(path, key.c_str(), err, sizeof err), DIODE_OK) << err;
  // Offline: served from the cache, with the reason.
  EXPECT_EQ(diode_client_pull(nullptr, kHw, w.cache.c_str(), key.c_str(), path, sizeof path, err, sizeof err),
            DIODE_OK_OFFLINE);
  EXPECT_NE(std::strstr(err, "served from the cache"), nullptr) << err;
  // A path buffer too small is reported, never overrun.
  char tiny[8];
  std::memset(tiny, 'x', sizeof tiny);
  EXPECT_EQ(diode_client_pull(nullptr, kHw, w.cache.c_str(), key.c_str(), tiny, sizeof tiny, err, sizeof err),
            DIODE_ERR_BUFFER);
  EXPECT_NE(std::strstr(err, "bytes"), nullptr) << err;
  // Error text is truncated to the buffer and NUL-terminated.
  char small_err[16];
  EXPECT_EQ(diode_client_pull("http://example.com", kHw, w.cache.c_str(), key.c_str(), path, sizeof path, small_err,
                              sizeof small_err),
            DIODE_ERR_ARGUMENT);
  EXPECT_EQ(std::strlen(small_err), sizeof small_err - 1);
  EXPECT_EQ(diode_client_pull(hub.url().c_str(), nullptr, nullptr, key.c_str(), path, sizeof path, err, sizeof err),
            DIODE_ERR_ARGUMENT);
  EXPECT_EQ(diode_client_pull(hub.url().c_str(), kHw, w.cache.c_str(), "zz", path, sizeof path, err, sizeof err),
            DIODE_ERR_ARGUMENT);
  EXPECT_EQ(diode_client_pull(hub.url().c_str(), "amd-mi300x-192gb", w.cache.c_str(), key.c_str(), path, sizeof path,
                              err, sizeof err),
            DIODE_ERR_HTTP);
  EXPECT_EQ(diode_client_pull("http://127.0.0.1:1", kHw, (w.tmp / "none").c_str(), key.c_str(), path, sizeof path, err,
                              sizeof err),
            DIODE_ERR_NETWORK);
  EXPECT_EQ(diode_client_verify(w.model.c_str(), key.c_str(), err, sizeof err), DIODE_ERR_VERIFY);  // no bundle.json
  EXPECT_NE(std::strstr(diode_client_version(), "abi 1"), nullptr);
}

TEST(CApi, PullAndVerifyAFamilyBundle) {
  World w;
  write_example_model((w.tmp / "fam").string(), kHw, 8, 1, "scaled_mm");
  PublishOptions po;
  po.now = w.now;
  publish(w.registry.string(), (w.tmp / "fam").string(), load_signing_keys(w.keys.string()), po);
  Hub hub(w.registry);
  const std::string key = w.pinned().hex();
  char path[4096], err[1024];
  ASSERT_EQ(diode_client_pull_family(hub.url().c_str(), kHw, "scaled_mm", w.cache.c_str(), key.c_str(), path,
                                     sizeof path, err, sizeof err),
            DIODE_OK)
      << err;
  EXPECT_EQ(fs::path(path), w.cache / kHw / "families" / "scaled_mm" / "1");
  EXPECT_EQ(diode_client_verify_family(path, "scaled_mm", key.c_str(), err, sizeof err), DIODE_OK) << err;
  EXPECT_EQ(diode_client_verify(path, key.c_str(), err, sizeof err), DIODE_OK) << err;  // any family
  EXPECT_EQ(diode_client_verify_family(path, "gemm", key.c_str(), err, sizeof err), DIODE_ERR_VERIFY);
  EXPECT_NE(std::strstr(err, "not the requested gemm"), nullptr) << err;
  EXPECT_EQ(diode_client_verify_family(path, "conv2d", key.c_str(), err, sizeof err), DIODE_ERR_ARGUMENT);
  EXPECT_NE(std::strstr(err, "conv2d"), nullptr) << err;
  // gemm through the family entry point is diode_client_pull: nothing published for it.
  EXPECT_EQ(diode_client_pull_family(hub.url().c_str(), kHw, "gemm", w.cache.c_str(), key.c_str(), path, sizeof path,
                                     err, sizeof err),
            DIODE_ERR_HTTP);
  EXPECT_EQ(diode_client_pull_family(hub.url().c_str(), kHw, nullptr, w.cache.c_str(), key.c_str(), path, sizeof path,
                                     err, sizeof err),
            DIODE_ERR_ARGUMENT);
}

TEST(Concurrency, ParallelPullsAndPublishesStayConsistent) {
  World w;
  w.publish_now();
  Hub hub(w.registry);
  const PullOptions o = pull_options(w, hub.url());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::vector<uint64_t> published(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      published[i] = w.publish_now().version;
      if (pull(o).version >= 1) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 4);
  std::sort(published.begin(), published.end());
  EXPECT_EQ(published, (std::vector<uint64_t>{2, 3, 4, 5}));  // every publisher got its own version
  EXPECT_EQ(pull(o).version, 5u);
  for (uint64_t v = 1; v <= 5; ++v) EXPECT_NO_THROW(verify_bundle_dir((w.hw_dir() / std::to_string(v)).string(), w.pinned(), w.now));
}
