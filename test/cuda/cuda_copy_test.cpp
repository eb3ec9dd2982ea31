// The copies between the GPU and the host (kernels/cuda/cuda_copy.cu): the
// step's rows of each buffer a call carries, through the mapping (pinned host
// memory) or the copy engine (pageable), and the gated step's host flags taken
// by the copy itself: an upload waits for the host's flag before it reads, and
// clears it; a download sets its flag once its bytes are in host memory.
#include <chrono>
#include <thread>

#include "test/cuda/cuda_test_util.h"

namespace kt::test {
namespace {

std::unique_ptr<kern::Kernel> make_copy(const char* k, const std::vector<kern::ActShape>& bufs, std::string* err) {
  const kern::KernelEntry* e = kern::find_kernel(k);
  if (!e) {
    *err = std::string(k) + " is not registered";
    return nullptr;
  }
  kern::CallSpec s;
  s.kernel = k;
  s.device = 0;
  s.in = bufs;
  s.out = bufs;
  return e->make(s, err);
}

TEST(CudaCopy, UploadDownloadCopyTheStepsRows) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(17);
  const std::vector<float> v = random_floats(50 * 8, rng);
  // Pinned host memory: the SMs copy through the mapping; pageable: the copy engine.
  for (const bool pinned : {true, false}) {
    for (const char* k : {"cuda.upload", "cuda.download"}) {
      SCOPED_TRACE(pinned ? "pinned" : "pageable");
      std::string err;
      auto kern = make_copy(k, {{GgmlType::F32, 50, 8}}, &err);
      ASSERT_TRUE(kern) << err;
      EXPECT_EQ(kern->transfer(), std::string(k) == "cuda.upload" ? kern::Kernel::Transfer::Upload
                                                                   : kern::Kernel::Transfer::Download);
      // Host side pinned or not, device side device memory; 5 of 8 rows move.
      float* host = nullptr;
      std::vector<float> pageable(v.size());
      void* dev = nullptr;
      if (pinned)
        KT_CUDA_OK(cudaMallocHost(&host, v.size() * 4));
      else
        host = pageable.data();
      KT_CUDA_OK(cudaMalloc(&dev, v.size() * 4));
      std::vector<float> back(v.size(), -7.0f);
      const bool up = std::string(k) == "cuda.upload";
      if (up) {
        std::memcpy(host, v.data(), v.size() * 4);
        KT_CUDA_OK(cudaMemcpy(dev, back.data(), back.size() * 4, cudaMemcpyHostToDevice));
      } else {
        KT_CUDA_OK(cudaMemcpy(dev, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
        std::memcpy(host, back.data(), back.size() * 4);
      }
      const kern::Act src{up ? static_cast<void*>(host) : dev, GgmlType::F32, 50, 5, 8};
      const kern::Act dst{up ? dev : static_cast<void*>(host), GgmlType::F32, 50, 5, 8};
      const kern::Step st;
      kern::CallArgs a;
      a.in = std::span<const kern::Act>(&src, 1);
      a.out = std::span<const kern::Act>(&dst, 1);
      a.step = &st;
      kern->run(a);
      KT_CUDA_OK(cudaDeviceSynchronize());
      if (up)
        KT_CUDA_OK(cudaMemcpy(back.data(), dev, back.size() * 4, cudaMemcpyDeviceToHost));
      else
        std::memcpy(back.data(), host, back.size() * 4);
      for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(back[i], i < 250 ? v[i] : -7.0f) << k << " at " << i;
      if (pinned) cudaFreeHost(host);
      cudaFree(dev);
    }
  }
}

// Buffers of one call (kt-insert-transfers joins a run's downloads): each
// buffer's rows to its own output, of its own type and width.
struct Buffers {
  std::vector<kern::ActShape> specs;
  std::vector<std::vector<uint32_t>> want;  // each buffer's words
  std::vector<void*> host, dev;
  bool pinned = true;
  ~Buffers() {
    for (void* h : host)
      if (pinned) cudaFreeHost(h);
      else std::free(h);
    for (void* d : dev) cudaFree(d);
  }
};

// Buffers of `words` 4-byte values each (rows of `cols`), random words on the
// source side, 0xdeadbeef on the other.
void fill(Buffers& b, const std::vector<std::pair<int64_t, int64_t>>& shapes, bool up, bool pinned, SplitMix64& rng) {
  b.pinned = pinned;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const auto [cols, rows] = shapes[k];
    b.specs.push_back({k % 2 ? GgmlType::I32 : GgmlType::F32, cols, rows});
    std::vector<uint32_t> w(size_t(cols * rows)), junk(w.size(), 0xdeadbeefu);
    for (uint32_t& x : w) x = uint32_t(rng.next());
    void* h = nullptr;
    if (pinned)
      EXPECT_EQ(cudaMallocHost(&h, w.size() * 4), cudaSuccess);
    else
      h = std::malloc(w.size() * 4);
    void* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, w.size() * 4), cudaSuccess);
    std::memcpy(h, (up ? w : junk).data(), w.size() * 4);
    EXPECT_EQ(cudaMemcpy(d, (up ? junk : w).data(), w.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    b.host.push_back(h);
    b.dev.push_back(d);
    b.want.push_back(std::move(w));
  }
}

// Each destination's words, after the queue has finished.
std::vector<std::vector<uint32_t>> landed(const Buffers& b, bool up) {
  std::vector<std::vector<uint32_t>> out;
  for (size_t k = 0; k < b.want.size(); ++k) {
    std::vector<uint32_t> w(b.want[k].size());
    if (up)
      EXPECT_EQ(cudaMemcpy(w.data(), b.dev[k], w.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    else
      std::memcpy(w.data(), b.host[k], w.size() * 4);
    out.push_back(std::move(w));
  }
  return out;
}

// Runs one copy call over b's buffers (every row), with the flags given.
void run_copy(kern::Kernel& k, const Buffers& b, bool up, cudaStream_t s, uint32_t* await, uint32_t* signal) {
  std::vector<kern::Act> src, dst;
  for (size_t i = 0; i < b.specs.size(); ++i) {
    const kern::ActShape& sp = b.specs[i];
    const kern::Act h{b.host[i], sp.type, sp.cols, sp.max_rows, sp.max_rows};
    const kern::Act d{b.dev[i], sp.type, sp.cols, sp.max_rows, sp.max_rows};
    src.push_back(up ? h : d);
    dst.push_back(up ? d : h);
  }
  static const kern::Step st;
  kern::CallArgs a;
  a.in = src;
  a.out = dst;
  a.step = &st;
  a.queue = s;
  a.await_flag = await;
  a.signal_flag = signal;
  k.run(a);
}

// Three buffers in one call, as a hybrid layer's download (normed rows, expert
// ids, weights): small (one kernel with its flag), past one block's share (64
// KB: the copy kernel, then the flag kernel), and pageable (the copy engine;
// downloads only: a pageable upload synchronizes the host with the queue,
// which here waits for the host). As in a gated step, an upload takes the
// host's flag and a download sets its own.
TEST(CudaCopy, BuffersOfOneCallWithTheirHostFlags) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(18);
  uint32_t* flags = nullptr;
  KT_CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&flags), 2 * sizeof(uint32_t), cudaHostAllocMapped));
  cudaStream_t s = nullptr;
  KT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct Case {
    const char* what;
    std::vector<std::pair<int64_t, int64_t>> shapes;
    bool pinned;
  };
  for (const Case& c : {Case{"small", {{2048, 1}, {6, 1}, {6, 1}}, true},
                        Case{"past one block", {{7168, 3}, {8, 3}, {7168, 1}}, true},
                        Case{"pageable", {{2048, 1}, {6, 1}, {6, 1}}, false}}) {
    for (const bool up : {true, false}) {
      if (up && !c.pinned) continue;
      const std::string what = std::string(c.what) + (up ? ", upload" : ", download");
      Buffers b;
      fill(b, c.shapes, up, c.pinned, rng);
      std::string err;
      auto k = make_copy(up ? "cuda.upload" : "cuda.download", b.specs, &err);
      ASSERT_TRUE(k) << what << ": " << err;
      ASSERT_TRUE(k->takes_flags());
      // No flags: a plain copy of every buffer.
      run_copy(*k, b, up, s, nullptr, nullptr);
      KT_CUDA_OK(cudaStreamSynchronize(s));
      EXPECT_EQ(landed(b, up), b.want) << what << ", no flags";

      Buffers f;
      fill(f, c.shapes, up, c.pinned, rng);
      if (up) {
        flags[0] = 0;  // the host's "done", not yet given
        run_copy(*k, f, up, s, &flags[0], nullptr);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        // Waiting for the host: nothing moved.
        EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady) << what;
        const auto early = landed(f, up);
        for (size_t i = 0; i < early.size(); ++i)
          EXPECT_EQ(early[i], std::vector<uint32_t>(early[i].size(), 0xdeadbeefu)) << what << ": buffer " << i;
        __atomic_store_n(&flags[0], 1u, __ATOMIC_RELEASE);
        KT_CUDA_OK(cudaStreamSynchronize(s));
        EXPECT_EQ(landed(f, up), f.want) << what;
        EXPECT_EQ(flags[0], 0u) << what << ": the host's flag was not cleared for its next use";
      } else {
        flags[1] = 0;  // the copy's "landed"
        run_copy(*k, f, up, s, nullptr, &flags[1]);
        // The host's side of "landed": spin on the word, as the executor does,
        // then read the bytes before the queue is known to have finished.
        const auto t0 = std::chrono::steady_clock::now();
        while (__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) != 1u &&
               std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
        }
        ASSERT_EQ(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE), 1u) << what << ": never signalled";
        EXPECT_EQ(landed(f, up), f.want) << what << ": the flag came before the bytes";
        KT_CUDA_OK(cudaStreamSynchronize(s));
      }
    }
  }
  cudaStreamDestroy(s);
  cudaFreeHost(flags);
}

TEST(CudaCopy, CallsOfTooManyOrUnmatchedBuffersAreRefused) {
  std::string err;
  EXPECT_FALSE(make_copy("cuda.download", std::vector<kern::ActShape>(9, {GgmlType::F32, 4, 1}), &err));
  EXPECT_NE(err.find("1 to 8 buffers"), std::string::npos) << err;
  const kern::KernelEntry* e = kern::find_kernel("cuda.download");
  ASSERT_NE(e, nullptr);
  kern::CallSpec s;
  s.kernel = "cuda.download";
  s.device = 0;
  s.in = {{GgmlType::F32, 4, 1}, {GgmlType::I32, 6, 1}};
  s.out = {{GgmlType::F32, 4, 1}, {GgmlType::I32, 5, 1}};
  err.clear();
  EXPECT_FALSE(e->make(s, &err));
  EXPECT_FALSE(err.empty());
}

}  // namespace
}  // namespace kt::test
