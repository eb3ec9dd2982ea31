// The CUDA kernels of products against their CPU reference kernels on random
// inputs: matmul, rope and the caches' stores, and the registry. Odd shapes,
// one token and several, several sequences in one step, both roundings
// (cuda_compare.h); the elementwise kernels, attention, MoE and the copies
// have their own files.
#include <algorithm>
#include <cstdio>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_matmul.h"
#include "test/cuda/cuda_compare.h"

namespace kt::test {
namespace {

// ---- matmul ----------------------------------------------------------------------

struct MatmulCase {
  GgmlType type;
  int64_t n_in, n_out;
};

bool takes_tiles(GgmlType t, Rounding r, int64_t rows) {
  return rows > cuda::MatmulOp::kVectorRows && t != GgmlType::F32 && r == Rounding::GgmlCpu;
}

double matmul_tol(GgmlType t, Rounding r, int64_t rows) {
  const bool tiles = takes_tiles(t, r, rows);
  if (!tiles) return 1e-5;
  // fp16 tensor cores: 11 bits per operand. F16/BF16 weights meet activations
  // rounded to their own type (exact products).
  return (t == GgmlType::F16 || t == GgmlType::BF16) ? 1e-5 : 2e-3;
}

TEST(CudaKernels, MatmulEveryTypeBothRoundingsAndBatches) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(5);
  std::vector<MatmulCase> cases;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    for (auto s : {std::pair<int64_t, int64_t>{70, 37}, {1024, 129}}) cases.push_back({t, s.first, s.second});
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0})
    for (auto s : {std::pair<int64_t, int64_t>{96, 37}, {1024, 300}}) cases.push_back({t, s.first, s.second});
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS})
    for (auto s : {std::pair<int64_t, int64_t>{256, 37}, {2304, 300}}) cases.push_back({t, s.first, s.second});
  // More than kTwoRowBlocks blocks at one row: two rows a warp, the last warp
  // with one (4099 rows).
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) cases.push_back({t, 256, 4099});
  uint64_t seed = 100;
  for (const MatmulCase& mc : cases) {
    for (int64_t rows : {1, 3, 8, 13, 40, 60}) {
      for (Rounding r : {Rounding::GgmlCpu, Rounding::Exact}) {
        if (r == Rounding::Exact && rows >= 40 && mc.n_in > 1024) continue;  // the CPU reference is slow
        Call c;
        c.op = "matmul";
        c.rounding = r;
        c.weights.push_back(Weight::random("w", mc.type, mc.n_in, mc.n_out, 1, ++seed));
        const bool bias = rows == 3;
        if (bias) c.weights.push_back(Weight::f32("b", random_floats(size_t(mc.n_out), rng), mc.n_out));
        c.in.push_back(Buf::f32(mc.n_in, rows, random_floats(size_t(mc.n_in * rows), rng, -2, 2), 64));
        c.out.push_back(Buf::f32(mc.n_out, rows, {}, 64));
        const std::string what = std::string(type_name(mc.type)) + " [" + std::to_string(mc.n_in) + ", " +
                                 std::to_string(mc.n_out) + "] x " + std::to_string(rows) + " rows " + rname(r);
        const bool tiles = takes_tiles(mc.type, r, rows);
        compare(c, matmul_tol(mc.type, r, rows), what,
                std::string("matmul ") + std::string(type_name(mc.type)) + (tiles ? " tiles" : " vector"));
      }
    }
  }
}

// Rows above kVectorRows: 8-bit-block weights decoded in the GEMM
// (Path::Decoded, cuda_moe_grouped_gemm.cuh over dense rows). Every deq32
// kind, K not a multiple of its 128-value chunks, rows and outputs that fill
// no whole tile, a bias, and tiles of 64, 128 and 256 rows (the latter two
// where the grid has enough blocks: 264 column blocks), against the reference
// at the tile path's tolerance. Gate and up in one GEMM with the SwiGLU in its
// epilogue: the bits of the two products and cuda.silu_mul. And which path
// Auto takes.
TEST(CudaKernels, MatmulDecodedInTheGemm) {
  KT_REQUIRE_GPU();
  using P = cuda::MatmulOp::Path;
  SplitMix64 rng(41);
  cudaStream_t s;
  KT_CUDA_OK(cudaStreamCreate(&s));
  DevMem mem;
  auto zeros = [&](size_t bytes) {
    void* p = mem.put(nullptr, bytes);
    EXPECT_EQ(cudaMemset(p, 0, bytes), cudaSuccess);
    return p;
  };
  // W^T x (+ bias) on the GPU through one MatmulOp path, into host floats.
  auto product = [&](const Weight& w, const Buf& x, const float* bias_dev, P path,
                     cuda::MatmulOp* op_out = nullptr) -> std::vector<float> {
    cuda::MatmulOp op;
    std::string e;
    EXPECT_TRUE(op.init(w.view(mem.put(w.bytes.data(), w.bytes.size())), x.rows, Rounding::GgmlCpu, &e)) << e;
    void* scratch = zeros(op.scratch_bytes() + 256);
    auto* xd = static_cast<const float*>(mem.put(x.bytes.data(), x.bytes.size()));
    auto* yd = static_cast<float*>(zeros(size_t(x.rows * w.ne[1]) * 4));
    op.run(xd, x.cols, x.rows, yd, w.ne[1], bias_dev, scratch, s, path);
    std::vector<float> y(size_t(x.rows * w.ne[1]));
    EXPECT_EQ(cudaMemcpyAsync(y.data(), yd, y.size() * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    if (op_out) *op_out = op;
    return y;
  };
  struct Case {
    GgmlType type;
    int64_t n_in, n_out, rows;
    bool bias;
  };
  uint64_t seed = 4100;
  for (const Case k : {Case{GgmlType::Q4_K, 2304, 300, 49, true}, Case{GgmlType::Q5_K, 512, 129, 200, false},
                       Case{GgmlType::Q6_K, 768, 70, 77, true}, Case{GgmlType::IQ4_XS, 256, 64, 64, false},
                       Case{GgmlType::Q8_0, 96, 16896, 100, true}, Case{GgmlType::Q4_0, 160, 16896, 300, false},
                       Case{GgmlType::Q5_0, 1056, 37, 512, true}}) {
    Call c;
    c.op = "matmul";
    c.weights.push_back(Weight::random("w", k.type, k.n_in, k.n_out, 1, ++seed));
    if (k.bias) c.weights.push_back(Weight::f32("b", random_floats(size_t(k.n_out), rng), k.n_out));
    c.in.push_back(Buf::f32(k.n_in, k.rows, random_floats(size_t(k.n_in * k.rows), rng, -2, 2)));
    c.out.push_back(Buf::f32(k.n_out, k.rows));
    const std::string what = std::string(type_name(k.type)) + " [" + std::to_string(k.n_in) + ", " +
                             std::to_string(k.n_out) + "] x " + std::to_string(k.rows) + " rows";
    const Outcome want = run_cpu(c);
    ASSERT_TRUE(want.error.empty()) << what << ": " << want.error;
    const float* bias = k.bias ? static_cast<const float*>(mem.put(c.weights[1].bytes.data(), c.weights[1].bytes.size()))
                               : nullptr;
    const std::vector<float> got = product(c.weights[0], c.in[0], bias, P::Decoded);
    ASSERT_TRUE(all_finite(got)) << what;
    const double e = rel_l2(got, want.out[0].floats());
    note("matmul decoded in the GEMM", e);
    EXPECT_LE(e, 2e-3) << what;
  }
  // Gate and up at once: the two products' bits and silu_mul's.
  for (int64_t rows : {60, 300}) {
    const Weight wg = Weight::random("gate", GgmlType::Q4_K, 2304, 16896, 1, 4200);
    const Weight wu = Weight::random("up", GgmlType::Q4_K, 2304, 16896, 1, 4201);
    const Buf x = Buf::f32(2304, rows, random_floats(size_t(2304 * rows), rng, -2, 2));
    cuda::MatmulOp gate, up;
    const std::vector<float> g = product(wg, x, nullptr, P::Decoded, &gate), u = product(wu, x, nullptr, P::Decoded, &up);
    Call sm;
    sm.op = "silu_mul";
    sm.in = {Buf::f32(16896, rows, g), Buf::f32(16896, rows, u)};
    sm.out.push_back(Buf::f32(16896, rows));
    const Outcome three = run_gpu(sm);
    ASSERT_TRUE(three.error.empty()) << three.error;
    void* scratch = zeros(std::max(gate.scratch_bytes(), up.scratch_bytes()) + 256);
    auto* xd = static_cast<const float*>(mem.put(x.bytes.data(), x.bytes.size()));
    auto* hd = static_cast<float*>(zeros(size_t(rows * 16896) * 4));
    auto* ud = static_cast<float*>(zeros(size_t(rows * 16896) * 4));
    gate.run_swiglu(up, xd, 2304, rows, hd, ud, scratch, s, nullptr, P::Decoded);
    std::vector<float> h(size_t(rows * 16896));
    KT_CUDA_OK(cudaMemcpyAsync(h.data(), hd, h.size() * 4, cudaMemcpyDeviceToHost, s));
    KT_CUDA_OK(cudaStreamSynchronize(s));
    const std::vector<float> want = three.out[0].floats();
    EXPECT_EQ(std::memcmp(h.data(), want.data(), h.size() * 4), 0)
        << rows << " rows: not the two products' and silu_mul's bits, max abs " << max_abs(h, want);
  }
  // Auto's rows (MatmulOp::decoded_rows): from 16 for large Q6_K matrices, 24
  // for large wide ones, 48 otherwise, up to 512 (256 below 2^25 weights);
  // never below 2^24 weights.
  struct Pick {
    GgmlType type;
    int64_t n_in, n_out, rows;
    const char* impl;
  };
  for (const Pick k : {Pick{GgmlType::Q4_K, 7168, 4864, 47, "int8-dp4a"}, Pick{GgmlType::Q4_K, 7168, 4864, 48, "deq-mma-f16"},
                       Pick{GgmlType::Q4_K, 7168, 4864, 512, "deq-mma-f16"}, Pick{GgmlType::Q4_K, 7168, 4864, 513, "wmma-fp16"},
                       Pick{GgmlType::Q6_K, 1536, 24576, 15, "int8-dp4a"}, Pick{GgmlType::Q6_K, 1536, 24576, 16, "deq-mma-f16"},
                       Pick{GgmlType::Q4_K, 2048, 16384, 23, "int8-dp4a"}, Pick{GgmlType::Q4_K, 2048, 16384, 24, "deq-mma-f16"},
                       Pick{GgmlType::Q4_K, 2048, 10944, 256, "deq-mma-f16"}, Pick{GgmlType::Q4_K, 2048, 10944, 257, "wmma-fp16"},
                       Pick{GgmlType::Q4_K, 2048, 3072, 64, "wmma-fp16"}}) {
    const Weight w = Weight::random("w", k.type, k.n_in, k.n_out, 1, 1);
    cuda::MatmulOp op;
    std::string e;
    ASSERT_TRUE(op.init(w.view(mem.put(nullptr, w.bytes.size())), 1024, Rounding::GgmlCpu, &e)) << e;
    EXPECT_EQ(op.impl(k.rows), k.impl) << type_name(k.type) << " " << k.n_in << " x " << k.n_out << " at " << k.rows
                                       << " rows";
  }
  KT_CUDA_OK(cudaStreamDestroy(s));
}

// The float path (F32 weights, Rounding::Exact) over a prompt takes the
// tensor-core products with split f16 operands (cuda_split_gemm.cuh) where
// rows x outputs reach 2^18: float accuracy, against the reference at the
// float path's tolerance; with a bias, a quantized type decoded exactly, rows
// and outputs that fill no whole block, and n_in not a multiple of the chunk.
TEST(CudaKernels, MatmulFloatPathOnTensorCores) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(29);
  struct Case {
    GgmlType type;
    Rounding r;
    int64_t n_in, n_out, rows;
    bool bias;
  };
  for (const Case k : {Case{GgmlType::F32, Rounding::GgmlCpu, 512, 600, 512, true},
                       Case{GgmlType::F32, Rounding::GgmlCpu, 1000, 333, 801, false},
                       Case{GgmlType::Q4_K, Rounding::Exact, 512, 600, 450, false},
                       Case{GgmlType::Q5_0, Rounding::Exact, 1024, 300, 900, true}}) {
    Call c;
    c.op = "matmul";
    c.rounding = k.r;
    c.weights.push_back(Weight::random("w", k.type, k.n_in, k.n_out, 1, 31));
    if (k.bias) c.weights.push_back(Weight::f32("b", random_floats(size_t(k.n_out), rng), k.n_out));
    c.in.push_back(Buf::f32(k.n_in, k.rows, random_floats(size_t(k.n_in * k.rows), rng, -2, 2)));
    c.out.push_back(Buf::f32(k.n_out, k.rows));
    const std::string what = std::string(type_name(k.type)) + " [" + std::to_string(k.n_in) + ", " +
                             std::to_string(k.n_out) + "] x " + std::to_string(k.rows) + " rows " + rname(k.r);
    // The path the kernel takes for these rows.
    void* dev = nullptr;
    KT_CUDA_OK(cudaMalloc(&dev, c.weights[0].bytes.size()));
    cuda::MatmulOp op;
    std::string e;
    ASSERT_TRUE(op.init(c.weights[0].view(dev), k.rows, k.r, &e)) << e;
    EXPECT_EQ(op.impl(k.rows), "split-f16") << what;
    cudaFree(dev);
    compare(c, 1e-5, what, "matmul float path, split-f16");
  }
}

// cuda.matmul_glu (kt-fuse-calls' gate, up and SwiGLU) against the three calls
// it replaces: the CPU reference's (within the matmul tolerance) and the GPU's
// own (the same bits: plans with and without the pass must agree). Pairs that
// take the one-rounding path (same activation blocks, up to kVectorRows rows;
// one row: gate and up in one launch, staged in shared memory or, Q5_0, not)
// and pairs that run the three kernels (Q8_0's 32-value blocks beside Q4_K's
// 256, F16, tile rows).
TEST(CudaKernels, MatmulGluMatchesItsThreeCalls) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(9);
  struct Pair {
    GgmlType gate, up;
    int64_t n_in, n_ff;
  };
  uint64_t seed = 900;
  for (const Pair pr : {Pair{GgmlType::Q4_K, GgmlType::Q4_K, 2304, 300}, Pair{GgmlType::Q4_K, GgmlType::Q6_K, 512, 77},
                        Pair{GgmlType::Q8_0, GgmlType::Q8_0, 96, 37}, Pair{GgmlType::Q5_0, GgmlType::Q5_0, 160, 38},
                        Pair{GgmlType::Q8_0, GgmlType::Q4_K, 512, 40},
                        Pair{GgmlType::F16, GgmlType::F16, 70, 37}}) {
    for (int64_t rows : {1, 5, 13, 60}) {
      const std::string what = std::string(type_name(pr.gate)) + "/" + std::string(type_name(pr.up)) + " [" +
                               std::to_string(pr.n_in) + ", " + std::to_string(pr.n_ff) + "] x " +
                               std::to_string(rows) + " rows";
      const Weight wg = Weight::random("gate", pr.gate, pr.n_in, pr.n_ff, 1, ++seed);
      const Weight wu = Weight::random("up", pr.up, pr.n_in, pr.n_ff, 1, ++seed);
      const Buf x = Buf::f32(pr.n_in, rows, random_floats(size_t(pr.n_in * rows), rng, -2, 2), 64);
      auto product = [&](const Weight& w) {
        Call c;
        c.op = "matmul";
        c.weights.push_back(w);
        c.in.push_back(x);
        c.out.push_back(Buf::f32(pr.n_ff, rows, {}, 64));
        return c;
      };
      // The three calls, on the CPU and on the GPU.
      auto three = [&](auto run) -> std::vector<float> {
        const Outcome g = run(product(wg)), u = run(product(wu));
        if (!g.error.empty() || !u.error.empty()) {
          ADD_FAILURE() << what << ": " << g.error << u.error;
          return {};
        }
        Call sm;
        sm.op = "silu_mul";
        sm.in = {g.out[0], u.out[0]};
        sm.out.push_back(Buf::f32(pr.n_ff, rows, {}, 64));
        const Outcome h = run(sm);
        if (!h.error.empty()) ADD_FAILURE() << what << ": " << h.error;
        return h.error.empty() ? h.out[0].floats() : std::vector<float>{};
      };
      const std::vector<float> want = three([](const Call& c) { return run_cpu(c); });
      const std::vector<float> unfused = three([](const Call& c) { return run_gpu(c); });
      Call f;
      f.op = "matmul_glu";
      f.weights = {wg, wu};
      f.in.push_back(x);
      f.out.push_back(Buf::f32(pr.n_ff, rows, {}, 64));
      const Outcome fused = run_gpu(f);
      ASSERT_TRUE(fused.error.empty()) << what << ": " << fused.error;
      ASSERT_FALSE(want.empty() || unfused.empty());
      const std::vector<float> got = fused.out[0].floats();
      ASSERT_TRUE(all_finite(got)) << what << ": unwritten (NaN) or non-finite values";
      EXPECT_EQ(std::memcmp(got.data(), unfused.data(), got.size() * 4), 0)
          << what << ": not the unfused calls' bits, max abs " << max_abs(got, unfused);
      const double e = rel_l2(got, want);
      note("matmul_glu (ggml)", e);
      EXPECT_LE(e, std::max(matmul_tol(pr.gate, Rounding::GgmlCpu, rows), matmul_tol(pr.up, Rounding::GgmlCpu, rows)))
          << what << ": rel L2 " << e;
    }
  }
}

// cuda.matmul_multi (kt-fuse-calls' products of one input) against the
// cuda.matmul calls it replaces: the GPU's own bits (plans with and without
// the pass must agree) and the CPU reference's within the matmul tolerance.
// Groups that share one launch (quantized, one type: 2-4 matrices of unequal
// heights, biased or not; one token with more than kTwoRowBlocks blocks, two
// rows a warp) and groups that run the products one by one (F16, tile rows);
// rows rounded by a norm (add_rms_norm's third output) taken as a second input.
TEST(CudaKernels, MatmulMultiMatchesItsProducts) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(10);
  struct Group {
    GgmlType type;
    int64_t n_in;
    std::vector<int64_t> n_out;
    bool bias;
  };
  uint64_t seed = 1000;
  for (const Group& g : {Group{GgmlType::Q4_K, 512, {96, 36}, false}, Group{GgmlType::Q8_0, 96, {40, 8, 8}, true},
                         Group{GgmlType::Q6_K, 256, {4000, 200}, false}, Group{GgmlType::IQ4_XS, 256, {5, 64, 3, 17}, true},
                         Group{GgmlType::Q5_0, 64, {33, 31}, false}, Group{GgmlType::F16, 70, {37, 11}, true}}) {
    std::vector<Weight> w, b;
    for (int64_t n : g.n_out) {
      w.push_back(Weight::random("w" + std::to_string(w.size()), g.type, g.n_in, n, 1, ++seed));
      if (g.bias) b.push_back(Weight::f32("b" + std::to_string(b.size()), random_floats(size_t(n), rng), n));
    }
    for (int64_t rows : {1, 3, 13, 60}) {
      for (bool rounded : {false, true}) {
        if (rounded && (g.type == GgmlType::F16 || rows > 13)) continue;
        const std::string what = std::string(type_name(g.type)) + " x" + std::to_string(g.n_out.size()) + " [" +
                                 std::to_string(g.n_in) + "] x " + std::to_string(rows) + " rows" +
                                 (rounded ? ", rounded by the norm" : "");
        std::vector<Buf> in;
        if (rounded) {
          const int act = g.type == GgmlType::Q8_0 || g.type == GgmlType::Q5_0 ? 32 : 256;
          Call norm = add_rms_norm_call(g.n_in, rows, rng);
          norm.out.push_back(Buf::i32(cuda::rounded_rows_cols(g.n_in, act), rows));
          norm.param("round_act", act);
          const Outcome nr = run_gpu(norm);
          ASSERT_TRUE(nr.error.empty()) << what << ": " << nr.error;
          in = {nr.out[1], nr.out[2]};
        } else {
          in = {Buf::f32(g.n_in, rows, random_floats(size_t(g.n_in * rows), rng, -2, 2), 64)};
        }
        Call multi;
        multi.op = "matmul_multi";
        multi.in = in;
        for (size_t i = 0; i < w.size(); ++i) {
          multi.weights.push_back(w[i]);
          multi.out.push_back(Buf::f32(g.n_out[i], rows, {}, 64));
        }
        multi.weights.insert(multi.weights.end(), b.begin(), b.end());
        const Outcome fused = run_gpu(multi);
        ASSERT_TRUE(fused.error.empty()) << what << ": " << fused.error;
        for (size_t i = 0; i < w.size(); ++i) {
          Call c;
          c.op = "matmul";
          c.in = {in[0]};
          c.weights.push_back(w[i]);
          if (g.bias) c.weights.push_back(b[i]);
          c.out.push_back(Buf::f32(g.n_out[i], rows, {}, 64));
          const Outcome one = run_gpu(c), want = run_cpu(c);
          ASSERT_TRUE(one.error.empty() && want.error.empty()) << what << ": " << one.error << want.error;
          const auto got = fused.out[i].floats(), own = one.out[0].floats();
          ASSERT_TRUE(all_finite(got)) << what << ", product " << i << ": unwritten (NaN) or non-finite values";
          EXPECT_EQ(std::memcmp(got.data(), own.data(), got.size() * 4), 0)
              << what << ", product " << i << ": not cuda.matmul's bits, max abs " << max_abs(got, own);
          const double e = rel_l2(got, want.out[0].floats());
          note("matmul_multi (ggml)", e);
          EXPECT_LE(e, matmul_tol(g.type, Rounding::GgmlCpu, rows)) << what << ", product " << i << ": rel L2 " << e;
        }
      }
    }
  }
  // Products of different widths are refused at bind.
  Call c;
  c.op = "matmul_multi";
  c.in.push_back(Buf::f32(256, 1, random_floats(256, rng)));
  c.weights = {Weight::random("a", GgmlType::Q4_K, 256, 8, 1, 1098), Weight::random("b", GgmlType::Q4_K, 512, 8, 1, 1099)};
  c.out = {Buf::f32(8, 1), Buf::f32(8, 1)};
  const Outcome bad = run_gpu(c);
  EXPECT_NE(bad.error.find("'b'"), std::string::npos) << bad.error;
}

// add_rms_norm's rounded output (kt-fuse-calls: the norm rounds its rows where
// it writes them) read by cuda.matmul and cuda.matmul_glu: the same bits as the
// products rounding the rows themselves, for Q8_K and Q8_0 blocks; a buffer of
// the other blocks is left unread (the product rounds for itself); a buffer of
// the wrong width is refused at bind.
TEST(CudaKernels, RoundedRowsFromTheNormMatchTheProductsOwnRounding) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(12);
  const int64_t n = 512, n_out = 96;
  uint64_t seed = 1200;
  for (const auto& [type, act] : {std::pair<GgmlType, int>{GgmlType::Q4_K, 256}, {GgmlType::Q6_K, 256},
                                  {GgmlType::Q8_0, 32}, {GgmlType::Q5_0, 32}, {GgmlType::Q8_0, 256}}) {
    const int buf_act = act, op_act = type == GgmlType::Q8_0 || type == GgmlType::Q5_0 ? 32 : 256;
    for (int64_t rows : {1, 3}) {
      const std::string what = std::string(type_name(type)) + " reading blocks of " + std::to_string(buf_act) +
                               " x " + std::to_string(rows);
      Call norm = add_rms_norm_call(n, rows, rng);
      norm.out.push_back(Buf::i32(cuda::rounded_rows_cols(n, buf_act), rows));
      norm.param("round_act", buf_act);
      const Outcome nr = run_gpu(norm);
      ASSERT_TRUE(nr.error.empty()) << what << ": " << nr.error;
      const Buf& h = nr.out[1];
      const Buf& hq = nr.out[2];
      const Weight w = Weight::random("w", type, n, n_out, 1, ++seed);
      const Weight u = Weight::random("u", type, n, n_out, 1, ++seed);
      for (const char* op : {"matmul", "matmul_glu"}) {
        auto product = [&](bool rounded) {
          Call c;
          c.op = op;
          c.weights.push_back(w);
          if (std::string(op) == "matmul_glu") c.weights.push_back(u);
          c.in.push_back(h);
          if (rounded) c.in.push_back(hq);
          c.out.push_back(Buf::f32(n_out, rows));
          return run_gpu(c);
        };
        const Outcome own = product(false), given = product(true);
        ASSERT_TRUE(own.error.empty() && given.error.empty()) << what << " " << op << ": " << own.error << given.error;
        const auto a = own.out[0].floats(), b = given.out[0].floats();
        ASSERT_TRUE(all_finite(a)) << what << " " << op;
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
            << what << " " << op << ": max abs " << max_abs(a, b) << (buf_act == op_act ? "" : " (buffer unread)");
      }
    }
  }
  // A rounded-rows input of the wrong width is refused at bind.
  Call c;
  c.op = "matmul";
  c.weights.push_back(Weight::random("w", GgmlType::Q4_K, n, n_out, 1, 1299));
  c.in.push_back(Buf::f32(n, 1, random_floats(size_t(n), rng)));
  c.in.push_back(Buf::i32(cuda::rounded_rows_cols(n, 256) + 1, 1));
  c.out.push_back(Buf::f32(n_out, 1));
  const Outcome bad = run_gpu(c);
  EXPECT_NE(bad.error.find("rounded rows"), std::string::npos) << bad.error;
}

// One token's int8 products with their weight rows staged in shared memory
// (KT_CUDA_STAGE, cuda_matmul.cu) against the same products read from global
// memory: the same bits. Rows a warp R = 1 and 2 (4099 rows), blocks of rows
// cut short at the end (37, 4099), the staged types (Q5_0, measured slower
// staged, reads global memory both ways and must too), several matrices in one
// launch (matmul_multi) and the experts' gate, up and down (moe_experts).
TEST(CudaKernels, StagedProductsMatchUnstagedBitForBit) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(17);
  uint64_t seed = 1700;
  auto both = [](const Call& c, const std::string& what) {
    cuda::set_stage_enabled(false);
    const Outcome plain = run_gpu(c);
    cuda::set_stage_enabled(true);
    const Outcome staged = run_gpu(c);
    ASSERT_TRUE(plain.error.empty() && staged.error.empty()) << what << ": " << plain.error << staged.error;
    for (size_t i = 0; i < plain.out.size(); ++i) {
      const auto a = plain.out[i].floats(), b = staged.out[i].floats();
      ASSERT_TRUE(all_finite(a)) << what;
      ASSERT_GT(max_abs(a, std::vector<float>(a.size(), 0.0f)), 0.0) << what << ": all zeros";
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << what << " output " << i << ": max abs "
                                                                   << max_abs(a, b);
    }
  };
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const int64_t n_in = type_traits(t).block_size == 256 ? 512 : 320;
    for (int64_t n_out : {37, 4099}) {
      Call c;
      c.op = "matmul";
      c.weights.push_back(Weight::random("w", t, n_in, n_out, 1, ++seed));
      c.in.push_back(Buf::f32(n_in, 1, random_floats(size_t(n_in), rng, -2, 2)));
      c.out.push_back(Buf::f32(n_out, 1));
      both(c, std::string("matmul ") + std::string(type_name(t)) + " x " + std::to_string(n_out));
    }
    Call m;
    m.op = "matmul_multi";
    m.in.push_back(Buf::f32(n_in, 1, random_floats(size_t(n_in), rng, -2, 2)));
    for (int64_t n_out : {44, 9}) {
      m.weights.push_back(Weight::random("w" + std::to_string(n_out), t, n_in, n_out, 1, ++seed));
      m.out.push_back(Buf::f32(n_out, 1));
    }
    both(m, std::string("matmul_multi ") + std::string(type_name(t)));
  }
  for (const auto& [gu, down] : {std::pair<GgmlType, GgmlType>{GgmlType::Q4_K, GgmlType::Q5_0},
                                 {GgmlType::Q4_K, GgmlType::Q6_K}, {GgmlType::Q8_0, GgmlType::Q4_0}}) {
    const int64_t n_embd = 512, n_ff = 512, ne = 8, nu = 3;
    Call c;
    c.op = "moe_experts";
    c.in.push_back(Buf::f32(n_embd, 1, random_floats(size_t(n_embd), rng)));
    c.in.push_back(Buf::i32(nu, 1, {5, 0, 7}));
    c.in.push_back(Buf::f32(nu, 1, {0.5f, 0.3f, 0.2f}));
    c.out.push_back(Buf::f32(n_embd, 1));
    c.weights.push_back(Weight::random("gate_exps", gu, n_embd, n_ff, ne, ++seed));
    c.weights.push_back(Weight::random("up_exps", gu, n_embd, n_ff, ne, ++seed));
    c.weights.push_back(Weight::random("down_exps", down, n_ff, n_embd, ne, ++seed));
    both(c, std::string("moe_experts ") + std::string(type_name(gu)) + "/" + std::string(type_name(down)));
  }
}

// ---- rope and caches ---------------------------------------------------------------

TEST(CudaKernels, RopePlainNeoxYarn) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(6);
  struct R {
    int n_dims, mode;
    bool yarn;
    int heads, head_dim, offset;
  };
  for (const R r : {R{64, 0, false, 3, 64, 0}, R{32, 2, false, 5, 48, 8}, R{64, 0, true, 4, 192, 128},
                    R{16, 0, true, 2, 48, 32}}) {
    Call c;
    c.op = "rope";
    rope_params(c, r.n_dims, r.mode, r.yarn, r.heads, r.head_dim, r.offset);
    c.step.add_run(0, 4000, 3);
    c.step.add_run(2, 0, 2);
    c.step.add_run(1, 77, 1);
    const int64_t cols = int64_t(r.heads) * r.head_dim + 3;
    c.in.push_back(Buf::f32(cols, 6, random_floats(size_t(cols * 6), rng)));
    c.out.push_back(Buf::f32(cols, 6));
    compare(c, 2e-6, "rope");
  }
}

TEST(CudaKernels, KvStoreEveryCacheType) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(7);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    Call c;
    c.op = "kv_store";
    c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::Kv, t, 3, 64, 2, 2 * 48, 2 * 40, 8));
    c.step.add_run(1, 10, 4);
    c.step.add_run(0, 63, 1);
    c.in.push_back(Buf::f32(96, 5, random_floats(96 * 5, rng)));
    c.in.push_back(Buf::f32(80, 5, random_floats(80 * 5, rng)));
    const Outcome cpu = run_cpu(c), gpu = run_gpu(c);
    ASSERT_TRUE(cpu.error.empty() && gpu.error.empty()) << cpu.error << gpu.error;
    EXPECT_EQ(cpu.k, gpu.k) << type_name(t);
    EXPECT_EQ(cpu.v, gpu.v) << type_name(t);
  }
}

TEST(CudaKernels, MlaCacheStore) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(8);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16}) {
    for (auto [r, dr] : {std::pair<int64_t, int64_t>{64, 16}, {512, 64}}) {
      Call c;
      c.op = "mla_cache_store";
      c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::MlaLatent, t, 2, 300, 1, r, dr, 9));
      c.step.add_run(1, 3, 3);
      c.step.add_run(0, 299, 1);
      c.in.push_back(Buf::f32(r + dr, 4, random_floats(size_t((r + dr) * 4), rng, -3, 3)));
      c.weights.push_back(Weight::f32("kv_a_norm", random_floats(size_t(r), rng, 0.5f, 1.5f), r));
      c.paramf("eps", 1e-6);
      rope_params(c, int(dr), 0, true, 1, int(dr), 0);
      c.params.erase(std::remove_if(c.params.begin(), c.params.end(),
                                    [](const kern::Param& p) {
                                      return p.key == "n_heads" || p.key == "head_dim" || p.key == "offset";
                                    }),
                     c.params.end());
      const Outcome cpu = run_cpu(c), gpu = run_gpu(c);
      ASSERT_TRUE(cpu.error.empty() && gpu.error.empty()) << cpu.error << gpu.error;
      const double ek = rel_l2(cache_floats(t, gpu.k), cache_floats(t, cpu.k));
      const double ev = rel_l2(cache_floats(t, gpu.v), cache_floats(t, cpu.v));
      note("mla_cache_store (ggml)", std::max(ek, ev));
      EXPECT_LE(ek, 1e-6) << type_name(t);
      EXPECT_LE(ev, 1e-6) << type_name(t);
    }
  }
}

// cuda.rope_mla_store (kt-fuse-calls' q rope and latent cache store) against
// the two calls on the GPU: q's roped rows and both caches bit for bit, both
// cache types, V2-Lite's shapes and small ones, several sequences in a step.
TEST(CudaKernels, RopeMlaStoreMatchesItsTwoCalls) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(14);
  struct Shape {
    int64_t r, dr, n_heads, d_nope;
  };
  for (GgmlType t : {GgmlType::F32, GgmlType::F16}) {
    for (const Shape sh : {Shape{64, 16, 4, 32}, Shape{512, 64, 16, 128}}) {
      const int64_t head_dim = sh.d_nope + sh.dr, rows = 4;
      const Buf q = Buf::f32(sh.n_heads * head_dim, rows, random_floats(size_t(sh.n_heads * head_dim * rows), rng, -3, 3));
      const Buf kv = Buf::f32(sh.r + sh.dr, rows, random_floats(size_t((sh.r + sh.dr) * rows), rng, -3, 3));
      const Weight norm = Weight::f32("kv_a_norm", random_floats(size_t(sh.r), rng, 0.5f, 1.5f), sh.r);
      auto call = [&](const char* op) {
        Call c;
        c.op = op;
        c.kv = std::make_unique<Kv>(random_kv(kern::KvView::Kind::MlaLatent, t, 2, 300, 1, sh.r, sh.dr, 9));
        c.step.add_run(1, 3, 3);
        c.step.add_run(0, 299, 1);
        rope_params(c, int(sh.dr), 0, true, int(sh.n_heads), int(head_dim), int(sh.d_nope));
        return c;
      };
      Call rope = call("rope");
      rope.kv.reset();
      rope.in.push_back(q);
      rope.out.push_back(Buf::f32(q.cols, rows));
      Call store = call("mla_cache_store");
      store.in.push_back(kv);
      store.weights.push_back(norm);
      store.paramf("eps", 1e-6);
      Call fused = call("rope_mla_store");
      fused.in = {q, kv};
      fused.out.push_back(Buf::f32(q.cols, rows));
      fused.weights.push_back(norm);
      fused.paramf("eps", 1e-6);
      const Outcome a = run_gpu(rope), b = run_gpu(store), f = run_gpu(fused);
      const std::string what = std::string(type_name(t)) + " r " + std::to_string(sh.r);
      ASSERT_TRUE(a.error.empty() && b.error.empty() && f.error.empty()) << what << ": " << a.error << b.error << f.error;
      const auto qa = a.out[0].floats(), qf = f.out[0].floats();
      ASSERT_TRUE(all_finite(qf)) << what;
      EXPECT_EQ(std::memcmp(qa.data(), qf.data(), qa.size() * 4), 0) << what << ": q, max abs " << max_abs(qa, qf);
      EXPECT_EQ(b.k, f.k) << what << ": latent cache";
      EXPECT_EQ(b.v, f.v) << what << ": rope-key cache";
    }
  }
}

TEST(CudaKernels, EveryKernelTheLoweringEmitsIsRegistered) {
  for (const char* n : {"embed", "rms_norm", "add", "silu_mul", "sigmoid_gate_add", "select_rows", "matmul",
                        "matmul_glu", "matmul_multi", "rope", "rope_mla_store",
                        "kv_store", "attention", "mla_cache_store", "mla_attention", "mla_attention_absorbed",
                        "mla_attention_store",
                        "moe_gate", "moe_experts", "upload", "download", "peer_copy"})
    EXPECT_NE(kern::find_kernel(std::string("cuda.") + n), nullptr) << n;
}

}  // namespace
}  // namespace kt::test
