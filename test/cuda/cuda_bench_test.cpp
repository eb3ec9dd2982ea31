// GPU kernel speed against the machine's measured limit, in the device run:
// the HBM copy bandwidth (bytes read + written by a device-to-device copy),
// matrix-vector GB/s of quantized weights on DeepSeek-V2-Lite / V3 shapes
// (weight bytes / time, several copies rotated so L2 cannot hold them), the
// crossover between the vector and the tensor-core path, and MLA / GQA decode
// attention at a context of 4096. Times are medians of event-timed batches
// after a warm-up. The table is printed last and written to KT_BENCH_OUT
// (default out/device/bench.txt) for scripts/device-run.sh.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <functional>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/cuda/cuda_attention.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_matmul.h"
#include "test/cuda/cuda_test_util.h"

namespace kt::test {
namespace {

std::ostringstream& table() {
  static std::ostringstream t;
  return t;
}

class BenchReport : public testing::Environment {
 public:
  void TearDown() override {
    const std::string s = table().str();
    if (s.empty()) return;
    std::printf("\n== GPU kernel benchmark ==\n%s", s.c_str());
    const char* path = std::getenv("KT_BENCH_OUT");
    std::ofstream f(path && *path ? path : "out/device/bench.txt");
    if (f) f << s;
  }
};
const auto* const g_env = testing::AddGlobalTestEnvironment(new BenchReport);

// Median milliseconds per call of fn over `batches` batches of `reps` calls.
double time_ms(cudaStream_t s, const std::function<void(int)>& fn, int reps = 20, int batches = 5) {
  for (int i = 0; i < 3; ++i) fn(i);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  int k = 0;
  for (int bi = 0; bi < batches; ++bi) {
    cudaEventRecord(a, s);
    for (int r = 0; r < reps; ++r) fn(k++);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t / float(reps));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return double(ms[ms.size() / 2]);
}

double g_copy_gbs = 0;

TEST(CudaBench, A_HbmCopyBandwidth) {
  KT_REQUIRE_GPU();
  const size_t bytes = size_t(1) << 30;
  void *x = nullptr, *y = nullptr;
  KT_CUDA_OK(cudaMalloc(&x, bytes));
  KT_CUDA_OK(cudaMalloc(&y, bytes));
  cudaMemset(x, 1, bytes);
  cudaStream_t s;
  cudaStreamCreate(&s);
  const double ms = time_ms(s, [&](int) { cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s); }, 5, 5);
  g_copy_gbs = 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
  table() << "HBM copy (read + write)                  " << int(g_copy_gbs) << " GB/s\n";
  cudaStreamDestroy(s);
  cudaFree(x);
  cudaFree(y);
}

// Host to device over PCIe, what streamed experts (cuda_moe_grouped.cu) pay:
// from pinned memory, from a read-only file mapping page-locked as the
// streamed kernel locks the GGUF's, and from pageable memory.
TEST(CudaBench, A_PcieHostToDevice) {
  KT_REQUIRE_GPU();
  const size_t bytes = size_t(512) << 20;
  void* dev = nullptr;
  KT_CUDA_OK(cudaMalloc(&dev, bytes));
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto gbs = [&](const void* src) {
    const double ms = time_ms(s, [&](int) { cudaMemcpyAsync(dev, src, bytes, cudaMemcpyHostToDevice, s); }, 4, 5);
    return double(bytes) / (ms * 1e-3) / 1e9;
  };
  void* pinned = nullptr;
  KT_CUDA_OK(cudaMallocHost(&pinned, bytes));
  std::memset(pinned, 1, bytes);
  const double g_pinned = gbs(pinned);
  cudaFreeHost(pinned);
  std::vector<uint8_t> pageable(bytes, 1);
  const double g_pageable = gbs(pageable.data());
  // A file mapping, as the executor maps the GGUF.
  char path[] = "/tmp/kt-pcie-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, pageable.data(), bytes), ssize_t(bytes));
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  const cudaError_t reg = cudaHostRegister(map, bytes, cudaHostRegisterPortable | cudaHostRegisterReadOnly);
  EXPECT_EQ(reg, cudaSuccess) << "page-locking a read-only file mapping: " << cudaGetErrorString(reg);
  const double g_mapped = reg == cudaSuccess ? gbs(map) : 0.0;
  if (reg == cudaSuccess) cudaHostUnregister(map);
  munmap(map, bytes);
  close(fd);
  unlink(path);
  char line[160];
  std::snprintf(line, sizeof line, "PCIe host->device: pinned %.1f GB/s, page-locked file mapping %.1f, pageable %.1f\n",
                g_pinned, g_mapped, g_pageable);
  table() << line;
  cudaStreamDestroy(s);
  cudaFree(dev);
}

struct Mat {
  const char* what;
  GgmlType type;
  int64_t n_in, n_out;
};

TEST(CudaBench, B_MatvecBandwidth) {
  KT_REQUIRE_GPU();
  const Mat mats[] = {
      {"V2-Lite up   2048x10944", GgmlType::Q4_K, 2048, 10944},
      {"V2-Lite up   2048x10944", GgmlType::Q6_K, 2048, 10944},
      {"V2-Lite up   2048x10944", GgmlType::Q8_0, 2048, 10944},
      {"V2-Lite down 10944x2048", GgmlType::Q5_0, 10944, 2048},
      {"V2-Lite down 10944x2048", GgmlType::Q8_0, 10944, 2048},
      {"V3 q/kv      7168x2048 ", GgmlType::Q4_K, 7168, 2048},
      {"V3 q/kv      7168x2048 ", GgmlType::Q6_K, 7168, 2048},
      {"V3 q/kv      7168x2048 ", GgmlType::Q8_0, 7168, 2048},
      {"V3 up        7168x18432", GgmlType::Q4_K, 7168, 18432},
      {"V3 up        7168x18432", GgmlType::Q6_K, 7168, 18432},
      {"V3 up        7168x18432", GgmlType::Q8_0, 7168, 18432},
      {"V3 down      18432x7168", GgmlType::Q6_K, 18432, 7168},
      {"V3 up        7168x18432", GgmlType::IQ4_XS, 7168, 18432},
      {"V3 up        7168x18432", GgmlType::Q5_K, 7168, 18432},
  };
  cudaStream_t s;
  cudaStreamCreate(&s);
  table() << "\nmatrix-vector, 1 token (weight bytes / time; % of the copy bandwidth above)\n";
  // KT_BENCH_MATVEC (a substring of "what type", e.g. "V3 up        7168x18432 Q4_K")
  // keeps only the matching shapes: for profiling one kernel under ncu.
  const char* only = std::getenv("KT_BENCH_MATVEC");
  for (const Mat& m : mats) {
    if (only && *only && (std::string(m.what) + " " + std::string(type_name(m.type))).find(only) == std::string::npos)
      continue;
    const Weight w = Weight::random("w", m.type, m.n_in, m.n_out, 1, 7);
    const size_t bytes = w.bytes.size();
    const int copies = int(std::max<size_t>(1, (256u << 20) / bytes + 1));
    std::vector<void*> dev(static_cast<size_t>(copies));
    for (void*& p : dev) {
      KT_CUDA_OK(cudaMalloc(&p, bytes));
      cudaMemcpy(p, w.bytes.data(), bytes, cudaMemcpyHostToDevice);
    }
    std::vector<cuda::MatmulOp> ops(static_cast<size_t>(copies));
    std::string e;
    for (int c = 0; c < copies; ++c) ASSERT_TRUE(ops[size_t(c)].init(w.view(dev[size_t(c)]), 8, kern::Rounding::GgmlCpu, &e)) << e;
    void* scratch = nullptr;
    KT_CUDA_OK(cudaMalloc(&scratch, ops[0].scratch_bytes() + 256));
    SplitMix64 rng(1);
    const std::vector<float> xh = random_floats(size_t(m.n_in * 8), rng);
    float *x = nullptr, *y = nullptr;
    KT_CUDA_OK(cudaMalloc(&x, xh.size() * 4));
    KT_CUDA_OK(cudaMalloc(&y, size_t(m.n_out * 8) * 4));
    cudaMemcpy(x, xh.data(), xh.size() * 4, cudaMemcpyHostToDevice);
    const bool batch8 = m.type == GgmlType::Q4_K && m.n_out == 18432;  // one batched row is enough
    for (int rows : {1, 8}) {
      if (rows == 8 && !batch8) break;
      const double ms = time_ms(s, [&](int k) {
        ops[size_t(k % copies)].run(x, m.n_in, rows, y, m.n_out, nullptr, scratch, s);
      });
      const double gbs = double(bytes) / (ms * 1e-3) / 1e9;
      char line[200];
      std::snprintf(line, sizeof line, "  %s %-6s x%d  %8.1f us  %6.0f GB/s  %5.1f%%\n", m.what,
                    std::string(type_name(m.type)).c_str(), rows, ms * 1e3, gbs,
                    g_copy_gbs > 0 ? 100.0 * gbs / g_copy_gbs : 0.0);
      table() << line;
    }
    KT_CUDA_OK(cudaStreamSynchronize(s));
    for (void* p : dev) cudaFree(p);
    cudaFree(scratch);
    cudaFree(x);
    cudaFree(y);
  }
  cudaStreamDestroy(s);
}

TEST(CudaBench, C_VectorVersusTiles) {
  KT_REQUIRE_GPU();
  for (const Mat m : {Mat{"V3 up 7168x18432", GgmlType::Q4_K, 7168, 18432},
                      Mat{"V3 down 18432x7168", GgmlType::Q6_K, 18432, 7168},
                      Mat{"V2-Lite dense up 2048x10944", GgmlType::Q4_K, 2048, 10944},
                      Mat{"V3 q_b 1536x24576", GgmlType::Q6_K, 1536, 24576},
                      Mat{"V3 o 16384x7168", GgmlType::Q4_K, 16384, 7168},
                      Mat{"V2-Lite q 2048x3072", GgmlType::Q4_K, 2048, 3072},
                      Mat{"V2-Lite shared up 2048x2816", GgmlType::Q4_K, 2048, 2816}}) {
    const Weight w = Weight::random("w", m.type, m.n_in, m.n_out, 1, 8);
    void* dev = nullptr;
    KT_CUDA_OK(cudaMalloc(&dev, w.bytes.size()));
    cudaMemcpy(dev, w.bytes.data(), w.bytes.size(), cudaMemcpyHostToDevice);
    cuda::MatmulOp op;
    std::string e;
    ASSERT_TRUE(op.init(w.view(dev), 1024, kern::Rounding::GgmlCpu, &e)) << e;
    void* scratch = nullptr;
    KT_CUDA_OK(cudaMalloc(&scratch, op.scratch_bytes() + 256));
    SplitMix64 rng(2);
    const std::vector<float> xh = random_floats(size_t(m.n_in * 1024), rng);
    float *x = nullptr, *y = nullptr;
    KT_CUDA_OK(cudaMalloc(&x, xh.size() * 4));
    KT_CUDA_OK(cudaMalloc(&y, size_t(m.n_out * 1024) * 4));
    cudaMemcpy(x, xh.data(), xh.size() * 4, cudaMemcpyHostToDevice);
    cudaStream_t s;
    cudaStreamCreate(&s);
    table() << "\n" << m.what << " " << type_name(m.type)
            << ": int8 vector path, fp16 tensor-core tiles, weights decoded in the GEMM (us; TFLOP/s)\n";
    using P = cuda::MatmulOp::Path;
    for (int rows : {8, 16, 24, 32, 48, 64, 128, 256, 512, 1024}) {
      auto timed = [&](P p) { return time_ms(s, [&](int) { op.run(x, m.n_in, rows, y, m.n_out, nullptr, scratch, s, p); }, 5, 3); };
      const double tv = rows <= 64 ? timed(P::Vector) : 0.0, tt = timed(P::Tiles), td = timed(P::Decoded);
      const double flop = 2.0 * double(m.n_in) * double(m.n_out) * rows;
      auto tf = [&](double t) { return t > 0 ? flop / (t * 1e-3) / 1e12 : 0.0; };
      char line[240];
      std::snprintf(line, sizeof line,
                    "  rows %4d  vector %8.1f us (%5.1f)  tiles %8.1f us (%5.1f)  decoded %8.1f us (%5.1f)  auto: %s\n",
                    rows, tv * 1e3, tf(tv), tt * 1e3, tf(tt), td * 1e3, tf(td), std::string(op.impl(rows)).c_str());
      table() << line;
    }
    KT_CUDA_OK(cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
    cudaFree(dev);
    cudaFree(scratch);
    cudaFree(x);
    cudaFree(y);
  }
}

// One decode token at position ctx - 1 through a bound kernel, timed. With
// variants, call k reads input variants[k % n] in place of input 0 .. (each a
// whole set of inputs' bytes), e.g. other experts' ids so that L2 cannot hold
// the weights from one call to the next.
double time_call(Call& c, cudaStream_t s, int reps = 20, const std::vector<std::vector<Buf>>& variants = {}) {
  DevMem mem;
  std::vector<kern::WeightView> wv;
  for (const Weight& w : c.weights) wv.push_back(w.view(mem.put(w.bytes.data(), w.bytes.size())));
  kern::KvView kv;
  if (c.kv) {
    kv = c.kv->shape;
    kv.k = mem.put(c.kv->k.data(), c.kv->k.size());
    kv.v = mem.put(c.kv->v.data(), c.kv->v.size());
  }
  const kern::CallSpec spec = spec_of(c, "cuda." + c.op, wv, c.kv ? &kv : nullptr, 0);
  std::string e;
  auto k = kern::find_kernel("cuda." + c.op)->make(spec, &e);
  EXPECT_TRUE(k) << e;
  if (!k) return 0;
  std::vector<kern::Act> ia, oa;
  for (const Buf& b : c.in) ia.push_back({mem.put(b.bytes.data(), b.bytes.size()), b.type, b.cols, b.rows, b.max_rows});
  for (const Buf& b : c.out) oa.push_back({mem.put(nullptr, b.bytes.size()), b.type, b.cols, b.rows, b.max_rows});
  const kern::Step st = c.step.view();
  kern::CallArgs a;
  a.in = ia;
  a.out = oa;
  a.weights = wv;
  a.kv = c.kv ? &kv : nullptr;
  a.step = &st;
  a.queue = s;
  std::vector<std::vector<void*>> vin;
  for (const std::vector<Buf>& v : variants) {
    vin.emplace_back();
    for (const Buf& b : v) vin.back().push_back(mem.put(b.bytes.data(), b.bytes.size()));
  }
  const double ms = time_ms(s, [&](int i) {
    if (!vin.empty())
      for (size_t j = 0; j < vin[size_t(i) % vin.size()].size(); ++j) ia[j].data = vin[size_t(i) % vin.size()][j];
    k->run(a);
  }, reps, 5);
  cudaStreamSynchronize(s);
  return ms;
}

// MLA's attention arguments for n tokens at positions [pos0, pos0 + n) of one
// slot over an F16 latent cache of pos0 + n positions (random q and cache from
// seed and seed + 1), the latents rounded to Q8_K blocks; device memory in mem,
// the partials' bound for plan_splits in *bound.
cuda::AttnArgs mla_bench_args(int h, int r, int dr, int n, int pos0, uint64_t seed, DevMem& mem, uint64_t* bound) {
  SplitMix64 rng(seed);
  const int ctx = pos0 + n;
  const std::vector<float> q = random_floats(size_t(n) * h * (r + dr), rng);
  const Kv kv = random_kv(kern::KvView::Kind::MlaLatent, GgmlType::F16, 1, ctx, 1, r, dr, seed + 1);
  std::vector<int32_t> pos(static_cast<size_t>(n)), slot(static_cast<size_t>(n), 0);
  for (int t = 0; t < n; ++t) pos[size_t(t)] = pos0 + t;
  cuda::AttnArgs a;
  a.q = static_cast<const float*>(mem.put(q.data(), q.size() * 4));
  a.q_stride = int64_t(h) * (r + dr);
  a.q_head_stride = r + dr;
  a.dk = r + dr;
  a.dv = r;
  a.n_heads = h;
  a.group = h;
  a.gh = cuda::attention_heads_per_block(r, h, false);
  a.scale = 0.1f;
  a.k = mem.put(kv.k.data(), kv.k.size());
  a.v = mem.put(kv.v.data(), kv.v.size());
  a.k_cols = r;
  a.v_cols = dr;
  a.n_ctx = ctx;
  a.vec = true;
  a.round_lat = 4;
  a.pos = static_cast<const int32_t*>(mem.put(pos.data(), pos.size() * 4));
  a.slot = static_cast<const int32_t*>(mem.put(slot.data(), slot.size() * 4));
  a.out = static_cast<float*>(mem.put(nullptr, size_t(n) * h * r * 4));
  a.out_stride = int64_t(h) * r;
  a.out_head_stride = r;
  *bound = cuda::partial_floats_bound(h, a.gh, r, cuda::sm_count(0));
  a.partial = static_cast<float*>(mem.put(nullptr, *bound * 4));
  return a;
}

// MLA's attention step alone (split-K over the latent cache + combine), as
// cuda_mla.cu launches it for one decode token: the rest of the call is q_abs
// and W_V.
double time_mla_attention_only(int h, int r, int dr, int ctx, cudaStream_t s) {
  DevMem mem;
  uint64_t bound = 0;
  cuda::AttnArgs a = mla_bench_args(h, r, dr, 1, ctx - 1, 9, mem, &bound);
  const int sms = cuda::sm_count(0);
  const int64_t tiles = std::max(1, ctx / 32 / 2);
  while (a.gh > 4 && (h + a.gh - 1) / a.gh * tiles < 2 * sms) a.gh /= 2;
  cuda::plan_splits(a, 1, ctx - 1, sms, bound);
  const double ms = time_ms(s, [&](int) { cuda::launch_attention(a, GgmlType::F16, true, 1, s); });
  const cuda::AttnArgs chosen = a;
  a.round_lat = 0;  // what the 8-bit rounding of each cached latent costs
  const double plain = time_ms(s, [&](int) { cuda::launch_attention(a, GgmlType::F16, true, 1, s); });
  std::printf("  (MLA %d heads, context %d: %d heads a block, %d splits of %d tiles; %.1f us, %.1f us without the "
              "latents' rounding)\n",
              h, ctx, a.gh, a.n_split, a.tiles_per_split, ms * 1e3, plain * 1e3);
  // Other shapes of the same work: heads a block x tiles a split.
  const int n_tiles = (ctx + 31) / 32;
  for (int gh : {1, 2, 4, 8})
    for (int tps : {1, 2, 4}) {
      cuda::AttnArgs b = chosen;
      b.gh = gh;
      b.tiles_per_split = tps;
      b.n_split = (n_tiles + tps - 1) / tps;
      if (uint64_t(h) * b.n_split * (r + 2) > bound) continue;
      const double t = time_ms(s, [&](int) { cuda::launch_attention(b, GgmlType::F16, true, 1, s); });
      std::printf("    gh %d, %d tiles a split (%3d splits, %4d blocks): %6.1f us\n", gh, tps, b.n_split,
                  b.n_split * ((h + gh - 1) / gh), t * 1e3);
    }
  cudaStreamSynchronize(s);
  return ms;
}

TEST(CudaBench, D_DecodeAttentionAtContext4096) {
  KT_REQUIRE_GPU();
  cudaStream_t s;
  cudaStreamCreate(&s);
  SplitMix64 rng(3);
  table() << "\ndecode attention, 1 token, F16 cache (us; cache bytes / time)\n";
  struct M {
    const char* what;
    int h, dn, dr, dv, r;
    bool split;  // k_b (Q5_0: rows of 128) + v_b (Q4_K), as kt-gguf synth --mla-split writes them
  };
  for (const int ctx : {512, 4096})
    for (const M m : {M{"MLA absorbed, V2-Lite (16 heads), kv_b  ", 16, 128, 64, 128, 512, false},
                      M{"MLA absorbed, V2-Lite (16 heads), k_b/v_b", 16, 128, 64, 128, 512, true},
                      M{"MLA absorbed, V3 (128 heads), kv_b      ", 128, 128, 64, 128, 512, false},
                      M{"MLA absorbed, V3 (128 heads), k_b/v_b   ", 128, 128, 64, 128, 512, true}}) {
      Call c;
      c.op = "mla_attention_absorbed";
      c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::MlaLatent, GgmlType::F16, 1, ctx, 1, m.r, m.dr, 4));
      c.step.add_run(0, ctx - 1, 1);
      c.in.push_back(Buf::f32(int64_t(m.h) * (m.dn + m.dr), 1, random_floats(size_t(m.h * (m.dn + m.dr)), rng)));
      c.out.push_back(Buf::f32(int64_t(m.h) * m.dv, 1));
      if (m.split) {
        c.weights.push_back(Weight::random("k_b", GgmlType::Q5_0, m.dn, m.r, m.h, 5));
        c.weights.push_back(Weight::random("v_b", GgmlType::Q4_K, m.r, m.dv, m.h, 6));
      } else {
        c.weights.push_back(Weight::random("kv_b", GgmlType::Q4_K, m.r, int64_t(m.h) * (m.dn + m.dv), 1, 5));
      }
      c.param("n_heads", m.h);
      c.param("d_nope", m.dn);
      c.param("d_rope", m.dr);
      c.param("d_v", m.dv);
      c.param("kv_lora_rank", m.r);
      c.paramf("kq_scale", 0.1);
      const double ms = time_call(c, s);
      const double cache = double(ctx) * (m.r + m.dr) * 2;
      const double att = time_mla_attention_only(m.h, m.r, m.dr, ctx, s);
      size_t wbytes = 0;
      for (const Weight& w : c.weights) wbytes += w.bytes.size();
      char line[320];
      std::snprintf(line, sizeof line,
                    "  ctx %4d %s %8.1f us  (attention step %.1f us: latent cache %.1f MB at %4.0f GB/s; q_abs + W_V "
                    "over %.1f MB: %.1f us)\n",
                    ctx, m.what, ms * 1e3, att * 1e3, cache / 1e6, cache / (att * 1e-3) / 1e9, double(wbytes) / 1e6,
                    (ms - att) * 1e3);
      table() << line;
    }
  const int ctx = 4096;
  {
    Call c;
    c.op = "attention";
    const int h = 32, hkv = 8, d = 128;
    c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::Kv, GgmlType::F16, 1, ctx, hkv, hkv * d, hkv * d, 6));
    c.step.add_run(0, ctx - 1, 1);
    c.in.push_back(Buf::f32(h * d, 1, random_floats(size_t(h * d), rng)));
    c.out.push_back(Buf::f32(h * d, 1));
    c.param("n_heads", h);
    c.param("n_kv_heads", hkv);
    c.param("head_dim_k", d);
    c.param("head_dim_v", d);
    c.paramf("kq_scale", 0.088);
    const double ms = time_call(c, s);
    const double cache = double(ctx) * hkv * d * 2 * 2;
    char line[200];
    std::snprintf(line, sizeof line, "  GQA 32 heads / 8 KV heads of 128     %8.1f us  (K+V cache %.1f MB: %5.0f GB/s)\n",
                  ms * 1e3, cache / 1e6, cache / (ms * 1e-3) / 1e9);
    table() << line;
  }
  cudaStreamDestroy(s);
}

// MLA's attention step alone for a prompt's chunk of n tokens at positions
// [pos0, pos0 + n) of one slot: the latents rounded once (Q8_K blocks), then
// launch_attention (the tensor-core kernel where it applies, else split-K).
double time_mla_prompt_attention(int h, int r, int dr, int n, int pos0, cudaStream_t s, bool* mma) {
  DevMem mem;
  uint64_t bound = 0;
  cuda::AttnArgs a = mla_bench_args(h, r, dr, n, pos0, 11, mem, &bound);
  const int ctx = pos0 + n, sms = cuda::sm_count(0);
  cuda::plan_splits(a, n, ctx - 1, sms, bound);
  auto* lat_q = static_cast<int8_t*>(mem.put(nullptr, size_t(ctx) * r));
  auto* lat_d = static_cast<float*>(mem.put(nullptr, size_t(ctx) * (r / 32) * 4));
  cuda::launch_round_latents(a, GgmlType::F16, n, ctx - 1, lat_q, lat_d, s);
  a.lat_q = lat_q;
  a.lat_d = lat_d;
  *mma = cuda::mla_mma_applies(a, n);
  const double ms = time_ms(s, [&](int) { cuda::launch_attention(a, GgmlType::F16, true, n, s); }, 5, 5);
  cudaStreamSynchronize(s);
  return ms;
}

// A prompt's chunk through MLA (q_abs, attention, W_V) far into a 2048-token
// prompt: V2-Lite's 512-token steps, V3's 120-token passes (cuda_mla.cu's 64 MB
// of q_abs and latent outputs). The attention step's float operations against
// its time (KT_CUDA_MLA_MMA=0: the split kernel on CUDA cores).
TEST(CudaBench, G_PromptChunkMla) {
  KT_REQUIRE_GPU();
  cudaStream_t s;
  cudaStreamCreate(&s);
  SplitMix64 rng(5);
  table() << "\nMLA, a prompt's chunk ending at position 2047, F16 cache, k_b/v_b (ms; attention TFLOP/s)\n";
  struct M {
    const char* what;
    int h, dn, dr, dv, r, n;
  };
  for (const M m : {M{"V2-Lite (16 heads), 512 tokens", 16, 128, 64, 128, 512, 512},
                    M{"V3 (128 heads), 120 tokens   ", 128, 128, 64, 128, 512, 120}}) {
    const int ctx = 2048, pos0 = ctx - m.n;
    Call c;
    c.op = "mla_attention_absorbed";
    c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::MlaLatent, GgmlType::F16, 1, ctx, 1, m.r, m.dr, 4));
    c.step.add_run(0, pos0, m.n);
    c.in.push_back(Buf::f32(int64_t(m.h) * (m.dn + m.dr), m.n, random_floats(size_t(m.h * (m.dn + m.dr) * m.n), rng)));
    c.out.push_back(Buf::f32(int64_t(m.h) * m.dv, m.n));
    c.weights.push_back(Weight::random("k_b", GgmlType::Q5_0, m.dn, m.r, m.h, 5));
    c.weights.push_back(Weight::random("v_b", GgmlType::Q4_K, m.r, m.dv, m.h, 6));
    c.param("n_heads", m.h);
    c.param("d_nope", m.dn);
    c.param("d_rope", m.dr);
    c.param("d_v", m.dv);
    c.param("kv_lora_rank", m.r);
    c.paramf("kq_scale", 0.1);
    const double call = time_call(c, s, 5);
    bool mma = false;
    const double att = time_mla_prompt_attention(m.h, m.r, m.dr, m.n, pos0, s, &mma);
    double flop = 0;
    for (int t = 0; t < m.n; ++t) flop += 2.0 * (pos0 + t + 1) * m.h * (2 * m.r + m.dr);
    char line[240];
    std::snprintf(line, sizeof line, "  %s  call %7.3f ms, attention %7.3f ms (%s: %5.1f TFLOP/s)\n", m.what, call,
                  att, mma ? "tensor cores" : "split-K", flop / (att * 1e-3) / 1e12);
    table() << line;
  }
  cudaStreamDestroy(s);
}

// MatmulOp's float path over a prompt (F32 weights: the router's logits):
// the float matrix-vector kernel (Path::Vector) against the tensor-core
// products it takes from 16 rows (cuda_split_gemm.cuh).
TEST(CudaBench, H_FloatPathOverAPrompt) {
  KT_REQUIRE_GPU();
  cudaStream_t s;
  cudaStreamCreate(&s);
  SplitMix64 rng(6);
  table() << "\nF32 weights over a prompt: float vector path vs split-f16 tensor cores (us; TFLOP/s)\n";
  struct M {
    const char* what;
    int64_t n_in, n_out;
  };
  for (const M m : {M{"router V2-Lite 2048x64  ", 2048, 64}, M{"router V3 7168x256     ", 7168, 256},
                    M{"dense 2048x1408        ", 2048, 1408}}) {
    const Weight w = Weight::random("w", GgmlType::F32, m.n_in, m.n_out, 1, 9);
    DevMem mem;
    void* dev = mem.put(w.bytes.data(), w.bytes.size());
    cuda::MatmulOp op;
    std::string e;
    ASSERT_TRUE(op.init(w.view(dev), 2048, kern::Rounding::GgmlCpu, &e)) << e;
    void* scratch = mem.put(nullptr, op.scratch_bytes() + 256);
    const std::vector<float> xh = random_floats(size_t(m.n_in * 2048), rng);
    auto* x = static_cast<float*>(mem.put(xh.data(), xh.size() * 4));
    auto* y = static_cast<float*>(mem.put(nullptr, size_t(m.n_out * 2048) * 4));
    for (int rows : {16, 512, 2048}) {
      const double tv = time_ms(s, [&](int) {
        op.run(x, m.n_in, rows, y, m.n_out, nullptr, scratch, s, cuda::MatmulOp::Path::Vector);
      }, 3, 3);
      const double ts = time_ms(s, [&](int) { op.run(x, m.n_in, rows, y, m.n_out, nullptr, scratch, s); }, 3, 3);
      const double flop = 2.0 * double(m.n_in) * double(m.n_out) * rows;
      char line[200];
      std::snprintf(line, sizeof line, "  %s rows %4d  float %9.1f us (%5.1f TF/s)  split-f16 %9.1f us (%5.1f TF/s)\n",
                    m.what, rows, tv * 1e3, flop / (tv * 1e-3) / 1e12, ts * 1e3, flop / (ts * 1e-3) / 1e12);
      table() << line;
    }
  }
  cudaStreamDestroy(s);
}

// The GPU's part of one hybrid V2-Lite decode layer, kernel by kernel, each
// launched back to back (so a kernel shorter than a launch shows the launch
// rate): what the chain between two CPU expert calls is made of.
TEST(CudaBench, E_DecodeLayerKernels) {
  KT_REQUIRE_GPU();
  cudaStream_t s;
  cudaStreamCreate(&s);
  SplitMix64 rng(5);
  table() << "\nV2-Lite decode layer on the GPU, 1 token, kernel by kernel (us)\n";
  auto row = [&](const std::string& what, Call& c, int32_t pos = 575) {
    c.step.add_run(0, pos, 1);
    char line[160];
    std::snprintf(line, sizeof line, "  %-44s %7.1f\n", what.c_str(), time_call(c, s, 50) * 1e3);
    table() << line;
  };
  auto matmul = [&](const char* what, GgmlType t, int64_t n_in, int64_t n_out) {
    Call c;
    c.op = "matmul";
    c.in.push_back(Buf::f32(n_in, 1, random_floats(size_t(n_in), rng)));
    c.out.push_back(Buf::f32(n_out, 1));
    c.weights.push_back(Weight::random("w", t, n_in, n_out, 1, 7));
    row(what, c);
  };
  {
    Call c;
    c.op = "rms_norm";
    c.in.push_back(Buf::f32(2048, 1, random_floats(2048, rng)));
    c.out.push_back(Buf::f32(2048, 1));
    c.weights.push_back(Weight::f32("norm", random_floats(2048, rng, 0.5f, 1.5f), 2048));
    c.paramf("eps", 1e-6);
    row("rms_norm 2048", c);
  }
  matmul("matmul q, Q4_K 2048 -> 3072", GgmlType::Q4_K, 2048, 3072);
  matmul("matmul kv_a, Q4_K 2048 -> 576", GgmlType::Q4_K, 2048, 576);
  matmul("matmul o, Q4_K 2048 -> 2048", GgmlType::Q4_K, 2048, 2048);
  matmul("matmul shared gate/up, Q4_K 2048 -> 2816", GgmlType::Q4_K, 2048, 2816);
  matmul("matmul shared down, Q6_K 2816 -> 2048", GgmlType::Q6_K, 2816, 2048);
  for (const auto& [op, n] : {std::pair<const char*, int64_t>{"add", 2048}, {"silu_mul", 2816}}) {
    Call c;
    c.op = op;
    for (int i = 0; i < 2; ++i) c.in.push_back(Buf::f32(n, 1, random_floats(size_t(n), rng)));
    c.out.push_back(Buf::f32(n, 1));
    row(std::string(op) + " " + std::to_string(n), c);
  }
  {
    Call c;
    c.op = "moe_gate";
    c.in.push_back(Buf::f32(2048, 1, random_floats(2048, rng)));
    c.out.push_back(Buf::i32(6, 1));
    c.out.push_back(Buf::f32(6, 1));
    c.weights.push_back(Weight::random("gate_inp", GgmlType::F32, 2048, 64, 1, 8, 0.0f, 0.2f));
    c.param("n_used", 6);
    c.param("gating", 1);
    c.param("n_group", 1);
    c.param("topk_group", 1);
    c.param("norm", 0);
    c.paramf("scale", 0.0);
    row("moe_gate V2-Lite (64 experts, top 6)", c);
  }
  for (int positions : {576, 2048}) {
    Call c;
    c.op = "mla_attention_absorbed";
    c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::MlaLatent, GgmlType::F16, 1, positions, 1, 512, 64, 4));
    c.in.push_back(Buf::f32(16 * 192, 1, random_floats(16 * 192, rng)));
    c.out.push_back(Buf::f32(16 * 128, 1));
    c.weights.push_back(Weight::random("k_b", GgmlType::Q5_0, 128, 512, 16, 5));
    c.weights.push_back(Weight::random("v_b", GgmlType::Q4_K, 512, 128, 16, 6));
    c.param("n_heads", 16);
    c.param("d_nope", 128);
    c.param("d_rope", 64);
    c.param("d_v", 128);
    c.param("kv_lora_rank", 512);
    c.paramf("kq_scale", 0.1);
    row("mla_attention_absorbed k_b/v_b, " + std::to_string(positions) + " positions", c, positions - 1);
  }
  cudaStreamDestroy(s);
}

// Routed experts at decode on the GPU (all-GPU plans: cuda.moe_experts, one
// token): gate, up with SwiGLU, down and the weighted sum, the token's experts
// changing call by call over all of them (sets of n_used distinct experts, more
// bytes in all than L2 holds), reported as the active experts' weight bytes over
// the time, against the copy bandwidth.
TEST(CudaBench, F_DecodeExperts) {
  KT_REQUIRE_GPU();
  struct M {
    const char* what;
    GgmlType gu, down;
    int64_t n_embd, n_ff, ne, nu;
  };
  cudaStream_t s;
  cudaStreamCreate(&s);
  SplitMix64 rng(9);
  table() << "\nrouted experts at decode, 1 token (active experts' bytes / time; % of the copy bandwidth)\n";
  for (const M& m : {M{"V2-Lite 6 of 64, 2048 x 1408", GgmlType::Q4_K, GgmlType::Q5_0, 2048, 1408, 64, 6},
                     M{"V2-Lite 6 of 64, 2048 x 1408", GgmlType::Q4_K, GgmlType::Q8_0, 2048, 1408, 64, 6},
                     M{"V3 8 of 32, 7168 x 2048     ", GgmlType::Q4_K, GgmlType::Q6_K, 7168, 2048, 32, 8}}) {
    Call c;
    c.op = "moe_experts";
    c.in.push_back(Buf::f32(m.n_embd, 1, random_floats(size_t(m.n_embd), rng)));
    std::vector<std::vector<Buf>> variants;
    for (int64_t v = 0; v < m.ne / m.nu; ++v) {
      std::vector<int32_t> ids;
      std::vector<float> w;
      for (int64_t k = 0; k < m.nu; ++k) {
        ids.push_back(int32_t(v * m.nu + k));
        w.push_back(0.2f + 0.5f * rng.uniform());
      }
      variants.push_back({c.in[0], Buf::i32(m.nu, 1, ids), Buf::f32(m.nu, 1, w)});
    }
    c.in.push_back(variants[0][1]);
    c.in.push_back(variants[0][2]);
    c.out.push_back(Buf::f32(m.n_embd, 1));
    c.weights.push_back(Weight::random("gate_exps", m.gu, m.n_embd, m.n_ff, m.ne, 31));
    c.weights.push_back(Weight::random("up_exps", m.gu, m.n_embd, m.n_ff, m.ne, 32));
    c.weights.push_back(Weight::random("down_exps", m.down, m.n_ff, m.n_embd, m.ne, 33));
    c.step.add_run(0, 575, 1);
    uint64_t bytes = 0;
    for (const Weight& w : c.weights) bytes += w.bytes.size() / uint64_t(m.ne) * uint64_t(m.nu);
    const double ms = time_call(c, s, 50, variants);
    const double gbs = double(bytes) / (ms * 1e-3) / 1e9;
    char line[200];
    std::snprintf(line, sizeof line, "  %s %s/%s  %7.1f us  %5.1f MB  %6.0f GB/s  %5.1f%%\n", m.what,
                  std::string(type_name(m.gu)).c_str(), std::string(type_name(m.down)).c_str(), ms * 1e3,
                  double(bytes) / 1e6, gbs, g_copy_gbs > 0 ? 100.0 * gbs / g_copy_gbs : 0.0);
    table() << line;
  }
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace kt::test
