// The "cuda" DeviceApi: memory, pinned copies on a queue, events, one-line
// errors; and count() == 0, silently, where there is no GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/device.h"
#include "test/cuda/cuda_test_util.h"

namespace kt::test {
namespace {

TEST(CudaDevice, RegisteredAndCountsDevices) {
  kern::DeviceApi* api = kern::find_device_api("cuda");
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->kind(), "cuda");
  EXPECT_EQ(api->count() > 0, have_gpu());  // 0 without a driver or GPU, no crash
}

TEST(CudaDevice, AllocCopyQueueEvents) {
  KT_REQUIRE_GPU();
  kern::DeviceApi* api = kern::find_device_api("cuda");
  std::string e;
  std::printf("cuda:0 is %s\n", api->name(0).c_str());
  uint64_t free_b = 0, total = 0;
  ASSERT_TRUE(api->mem_info(0, &free_b, &total));
  EXPECT_GT(total, 0u);
  EXPECT_LE(free_b, total);

  const size_t n = 1 << 20;
  std::vector<float> host(n), back(n, 0.0f);
  for (size_t i = 0; i < n; ++i) host[i] = float(i) * 0.5f - 3.0f;
  ASSERT_TRUE(api->pin(host.data(), n * 4, &e)) << e;
  ASSERT_TRUE(api->pin(back.data(), n * 4, &e)) << e;
  void* d = api->alloc(0, n * 4, &e);
  ASSERT_NE(d, nullptr) << e;
  ASSERT_TRUE(api->memset_zero(0, d, n * 4, &e)) << e;
  void* q = api->create_queue(0, &e);
  ASSERT_NE(q, nullptr) << e;
  ASSERT_TRUE(api->copy(d, host.data(), n * 4, q, &e)) << e;
  ASSERT_TRUE(api->copy(back.data(), d, n * 4, q, &e)) << e;
  void* ev = api->record_event(q, &e);
  ASSERT_NE(ev, nullptr) << e;
  ASSERT_TRUE(api->wait_event(ev, &e)) << e;
  EXPECT_TRUE(api->event_done(ev));
  api->release_event(ev);
  EXPECT_EQ(std::memcmp(host.data(), back.data(), n * 4), 0);
  // Synchronous copy (queue null), device to device.
  void* d2 = api->alloc(0, n * 4, &e);
  ASSERT_NE(d2, nullptr) << e;
  ASSERT_TRUE(api->copy(d2, d, n * 4, nullptr, &e)) << e;
  std::fill(back.begin(), back.end(), 0.0f);
  ASSERT_TRUE(api->copy(back.data(), d2, n * 4, nullptr, &e)) << e;
  EXPECT_EQ(std::memcmp(host.data(), back.data(), n * 4), 0);
  ASSERT_TRUE(api->sync(q, &e)) << e;
  api->destroy_queue(0, q);
  api->free(0, d);
  api->free(0, d2);
  api->unpin(host.data());
  api->unpin(back.data());
}

// Host flags: a queue holds a copy back until the host sets a word, then says
// with another word that the copy landed; also recorded as a graph and
// replayed twice (what gated hybrid decode does per layer).
TEST(CudaDevice, HostFlagsGateAQueueAlsoRecorded) {
  KT_REQUIRE_GPU();
  kern::DeviceApi* api = kern::find_device_api("cuda");
  std::string e;
  uint32_t* f = api->alloc_flags(0, 2, &e);
  ASSERT_NE(f, nullptr) << e;
  EXPECT_EQ(f[0], 0u);
  EXPECT_EQ(f[1], 0u);
  const size_t n = 1 << 16;
  std::vector<float> host(n), back(n);
  ASSERT_TRUE(api->pin(host.data(), n * 4, &e)) << e;
  ASSERT_TRUE(api->pin(back.data(), n * 4, &e)) << e;
  void* d = api->alloc(0, n * 4, &e);
  ASSERT_NE(d, nullptr) << e;
  void* q = api->create_queue(0, &e);
  ASSERT_NE(q, nullptr) << e;
  auto await = [&](uint32_t* w) {  // up to 5 s
    for (int i = 0; i < 5000000 && __atomic_load_n(w, __ATOMIC_ACQUIRE) != 1; ++i) std::this_thread::yield();
    return __atomic_load_n(w, __ATOMIC_ACQUIRE) == 1;
  };
  auto issue = [&] {
    ASSERT_TRUE(api->wait_flag(q, &f[0], 1, &e)) << e;
    ASSERT_TRUE(api->copy(d, host.data(), n * 4, q, &e)) << e;
    ASSERT_TRUE(api->copy(back.data(), d, n * 4, q, &e)) << e;
    ASSERT_TRUE(api->write_flag(q, &f[1], 1, &e)) << e;
  };
  auto check_round = [&](float base) {
    for (size_t i = 0; i < n; ++i) host[i] = base + float(i);
    std::fill(back.begin(), back.end(), -1.0f);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(__atomic_load_n(&f[1], __ATOMIC_ACQUIRE), 0u) << "the queue went on before the host's flag";
    EXPECT_EQ(back[0], -1.0f);
    __atomic_store_n(&f[0], 1u, __ATOMIC_RELEASE);
    ASSERT_TRUE(await(&f[1])) << "no landed flag within 5 s";
    f[1] = 0;
    EXPECT_EQ(std::memcmp(host.data(), back.data(), n * 4), 0) << "the flag came before the copy's bytes";
    ASSERT_TRUE(api->sync(q, &e)) << e;
    EXPECT_EQ(f[0], 0u) << "the queue did not clear the flag it waited for";
  };
  issue();
  check_round(1.0f);
  // Recorded once, replayed twice.
  if (api->begin_capture(q, &e)) {
    issue();
    void* g = api->end_capture(q, &e);
    ASSERT_NE(g, nullptr) << e;
    for (float base : {100.0f, 7000.0f}) {
      ASSERT_TRUE(api->launch_graph(g, q, &e)) << e;
      check_round(base);
    }
    api->release_graph(g);
  }
  api->destroy_queue(0, q);
  api->free(0, d);
  api->unpin(host.data());
  api->unpin(back.data());
  api->free_flags(f);
}

TEST(CudaDevice, AllocationFailureIsOneLineWithTheNumbers) {
  KT_REQUIRE_GPU();
  kern::DeviceApi* api = kern::find_device_api("cuda");
  std::string e;
  void* p = api->alloc(0, uint64_t(1) << 50, &e);  // a petabyte
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(e.find("1125899906842624 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("free"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // The device still works afterwards.
  void* q = api->alloc(0, 1024, &e);
  EXPECT_NE(q, nullptr) << e;
  api->free(0, q);
}

}  // namespace
}  // namespace kt::test
