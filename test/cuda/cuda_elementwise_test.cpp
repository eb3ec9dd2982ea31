// The CUDA elementwise kernels (cuda_elementwise.cu) against their CPU
// reference kernels on random inputs: embed, rms_norm, add_rms_norm (and the
// rows it rounds for the products after it), add, silu_mul, sigmoid_gate_add,
// select_rows. Odd shapes, one token and several (cuda_compare.h).
#include <cstring>

#include "kernels/cpu/ops_ref.h"
#include "kernels/cuda/cuda_rounded_rows.h"
#include "test/cuda/cuda_compare.h"

namespace kt::test {
namespace {

// ---- elementwise ---------------------------------------------------------------

TEST(CudaKernels, EmbedBitExactForEveryType) {
  KT_REQUIRE_GPU();
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    const int64_t n_embd = type_traits(t).block_size * 3, n_vocab = 37;
    Call c;
    c.op = "embed";
    c.weights.push_back(Weight::random("tok_embd", t, n_embd, n_vocab, 1, 11));
    c.step.tokens = {5, 0, 36, 5, 17};
    c.step.add_run(0, 0, 5);
    c.out.push_back(Buf::f32(n_embd, 5, {}, 8));
    const Outcome cpu = run_cpu(c), gpu = run_gpu(c);
    ASSERT_TRUE(cpu.error.empty() && gpu.error.empty()) << cpu.error << gpu.error;
    const auto g = gpu.out[0].floats(), w = cpu.out[0].floats();
    EXPECT_EQ(std::memcmp(g.data(), w.data(), g.size() * 4), 0) << type_name(t) << ": max abs " << max_abs(g, w);
    note("embed (bits)", max_abs(g, w));
  }
}

TEST(CudaKernels, RmsNormRowsAndGroups) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(3);
  struct Shape {
    int64_t cols, group, rows;
  };
  // 7168: the registers path (896 threads); 10000: more than 1024 threads' registers hold (a loop).
  for (const Shape s : {Shape{7168, 7168, 1}, Shape{10000, 10000, 2}, Shape{64, 64, 5}, Shape{1536, 128, 3},
                        Shape{100, 20, 7}}) {
    Call c;
    c.op = "rms_norm";
    c.in.push_back(Buf::f32(s.cols, s.rows, random_floats(size_t(s.cols * s.rows), rng, -3, 3)));
    c.out.push_back(Buf::f32(s.cols, s.rows));
    c.weights.push_back(Weight::f32("norm", random_floats(size_t(s.group), rng, 0.5f, 1.5f), s.group));
    c.paramf("eps", 1e-6);
    if (s.group != s.cols) c.param("group", s.group);
    compare(c, 1e-6, "rms_norm " + std::to_string(s.cols) + "/" + std::to_string(s.group));
  }
}

// The residual sum and the norm after it in one call (kt-fuse-calls): both
// outputs against the CPU's add then rms_norm.
TEST(CudaKernels, AddRmsNorm) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(5);
  // 2048 and 7168: the registers path; 10000: the loop; 100 x 7: small rows.
  for (const auto& [cols, rows] : {std::pair<int64_t, int64_t>{2048, 1}, {7168, 3}, {10000, 2}, {100, 7}})
    compare(add_rms_norm_call(cols, rows, rng), 1e-6,
            "add_rms_norm " + std::to_string(cols) + " x " + std::to_string(rows));
}

// A third addend (kt-fuse-calls folds a cuda.add of two outputs into the
// residual's norm): y = a + (b + c) and its norm, the same bits as cuda.add
// of b and c then the two-input add_rms_norm; and, with the rounded output, its
// rounded rows too.
TEST(CudaKernels, AddRmsNormOfThreeIsTheAddThenTheNorm) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(6);
  for (const auto& [cols, rows] : {std::pair<int64_t, int64_t>{2048, 1}, {7168, 3}, {10000, 2}, {100, 7}}) {
    for (const bool rounded : {false, true}) {
      if (rounded && cols % 256 != 0) continue;
      const std::string what = std::to_string(cols) + " x " + std::to_string(rows) + (rounded ? ", rounded" : "");
      Call two = add_rms_norm_call(cols, rows, rng);
      if (rounded) {
        two.out.push_back(Buf::i32(cuda::rounded_rows_cols(cols, 256), rows));
        two.param("round_act", 256);
      }
      const Buf c = Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng, -1, 1));
      Call add;
      add.op = "add";
      add.in = {two.in[1], c};
      add.out.push_back(Buf::f32(cols, rows));
      const Outcome sum = run_gpu(add);
      ASSERT_TRUE(sum.error.empty()) << what << ": " << sum.error;
      Call three;  // Call holds a unique_ptr: copied by hand
      three.op = two.op;
      three.in = {two.in[0], two.in[1], c};
      three.out = two.out;
      three.weights = two.weights;
      three.params = two.params;
      two.in[1] = sum.out[0];
      const Outcome want = run_gpu(two), got = run_gpu(three);
      ASSERT_TRUE(want.error.empty() && got.error.empty()) << what << ": " << want.error << got.error;
      for (size_t k = 0; k < want.out.size(); ++k) {
        ASSERT_EQ(got.out[k].bytes.size(), want.out[k].bytes.size());
        EXPECT_EQ(got.out[k].bytes, want.out[k].bytes) << what << ": output " << k << " differs";
      }
      // Not the two-input result: the third addend is read.
      three.in.pop_back();
      const Outcome without = run_gpu(three);
      ASSERT_TRUE(without.error.empty()) << without.error;
      EXPECT_NE(without.out[0].bytes, got.out[0].bytes) << what;
    }
  }
}

TEST(CudaKernels, AddSiluMulSigmoidGateAddSelectRows) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(4);
  for (int64_t rows : {1, 6}) {
    const int64_t cols = 1001;
    for (const char* op : {"add", "silu_mul"}) {
      Call c;
      c.op = op;
      c.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng, -4, 4)));
      c.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng, -4, 4)));
      c.out.push_back(Buf::f32(cols, rows));
      compare(c, 1e-7, op);
    }
    Call g;
    g.op = "sigmoid_gate_add";
    g.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng)));
    g.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng)));
    g.in.push_back(Buf::f32(1, rows, random_floats(size_t(rows), rng, -3, 3)));
    g.out.push_back(Buf::f32(cols, rows));
    compare(g, 1e-7, "sigmoid_gate_add");
  }
  Call s;
  s.op = "select_rows";
  s.step.add_run(0, 0, 9);
  s.step.outputs = {0, 4, 8};
  s.in.push_back(Buf::f32(333, 9, random_floats(333 * 9, rng)));
  s.out.push_back(Buf::f32(333, 3));
  compare(s, 0.0, "select_rows");
}

// add_rms_norm's rounded rows (kt-fuse-calls: the norm rounds h where it
// computes it) against the CPU reference's rounding of the norm's own h
// (ops_ref round_activations: ggml's Q8_0 and Q8_K rounding): q * d equal to
// the reference's value, every value. Rows of 2048 (256 threads), 7168 (896
// threads) and 16384 (more than 1024 threads' registers hold). Row 0
// plants a block whose largest magnitude comes twice, negative first (Q8_K's
// first one becomes -127, so q there is -127 and +127 at the second; products
// alone would not tell the two apart), and an all-zero block (q 0, scale 0).
TEST(CudaKernels, AddRmsNormRoundsItsRowsAsTheReference) {
  KT_REQUIRE_GPU();
  SplitMix64 rng(13);
  for (const int act : {32, 256}) {
    for (const auto& [n, rows] : {std::pair<int64_t, int64_t>{2048, 1}, {7168, 3}, {16384, 2}}) {
      const std::string what = std::to_string(n) + " x " + std::to_string(rows) + ", blocks of " + std::to_string(act);
      std::vector<float> a = random_floats(size_t(n * rows), rng, -3, 3), b = random_floats(size_t(n * rows), rng, -1, 1);
      std::vector<float> w = random_floats(size_t(n), rng, 0.5f, 1.5f);
      const int64_t tie = act, zero = 2 * act;  // row 0's planted blocks
      for (int64_t j = 0; j < act; ++j) {
        a[size_t(tie + j)] = 0.25f * (2 * rng.uniform() - 1);
        b[size_t(tie + j)] = 0.0f;
        w[size_t(tie + j)] = 1.0f;
        a[size_t(zero + j)] = b[size_t(zero + j)] = 0.0f;
      }
      a[size_t(tie + 5)] = -2.0f, a[size_t(tie + 9)] = 2.0f;
      Call c;
      c.op = "add_rms_norm";
      c.in = {Buf::f32(n, rows, a), Buf::f32(n, rows, b)};
      c.out = {Buf::f32(n, rows), Buf::f32(n, rows), Buf::i32(cuda::rounded_rows_cols(n, act), rows)};
      c.weights.push_back(Weight::f32("norm", w, n));
      c.paramf("eps", 1e-6);
      c.param("round_act", act);
      const Outcome g = run_gpu(c);
      ASSERT_TRUE(g.error.empty()) << what << ": " << g.error;
      const std::vector<float> h = g.out[1].floats();
      const auto* q = reinterpret_cast<const int8_t*>(g.out[2].bytes.data());
      const auto* d = reinterpret_cast<const float*>(g.out[2].bytes.data() + rows * n);
      const GgmlType blocks_of = act == 32 ? GgmlType::Q8_0 : GgmlType::Q4_K;  // a weight type taking them
      int64_t differ = 0;
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> want(static_cast<size_t>(n));
        cpu::ref::round_activations(blocks_of, cpu::ref::ActRounding::GgmlCpu, h.data() + r * n, n, want.data());
        for (int64_t i = 0; i < n; ++i) {
          const float got = d[r * (n / act) + i / act] * float(q[r * n + i]);
          // == not memcmp: the reference's q is a float that can be -0 (d * -0 =
          // +0 for a negative d), the GPU's an integer.
          if (got != want[size_t(i)] && differ++ < 3)
            ADD_FAILURE() << what << ": row " << r << " value " << i << ": " << got << " against " << want[size_t(i)];
        }
      }
      EXPECT_EQ(differ, 0) << what;
      if (act == 256) {
        EXPECT_EQ(q[tie + 5], -127) << what << ": the first of the largest magnitudes";
        EXPECT_EQ(q[tie + 9], 127) << what;
      }
      for (int64_t j = 0; j < act; ++j) ASSERT_EQ(q[zero + j], 0) << what;
      EXPECT_EQ(d[zero / act], 0.0f) << what;
    }
  }
}

}  // namespace
}  // namespace kt::test
