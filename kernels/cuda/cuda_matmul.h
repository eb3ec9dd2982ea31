// y = x W^T (+ bias) on the GPU, for every weight type kt's CUDA kernels take
// (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, IQ4_XS). cuda.matmul,
// cuda.moe_gate (the router) and cuda.moe_experts build on it.
//
// Four paths (kernels/cuda/README.md has the numbers behind the choice):
//  - vector, int8 (quantized W, Rounding::GgmlCpu, up to kVectorRows rows):
//    the activations are rounded to 8-bit blocks exactly as ggml's CPU backend
//    rounds them, then one warp per output row reads each weight byte once and
//    multiplies it with up to 8 token rows by __dp4a. Same numbers as the
//    GgmlCpu reference up to float summation order (~1e-6).
//  - vector, float (F32/F16/BF16 W, and every W under Rounding::Exact):
//    the same structure with float activations (rounded to F16/BF16 first for
//    F16/BF16 W under GgmlCpu, as ggml does) and float accumulation.
//  - tiles (more than kVectorRows rows, all types but F32): W dequantized to
//    fp16 (bf16 for BF16 W; F16/BF16 W used in place) in row chunks, the
//    activations rounded as the reference rounds them and scaled by a power of
//    two per row into fp16, then a tensor-core GEMM (wmma 16x16x16, fp32
//    accumulation). fp16 keeps 11 bits of each value: ~2e-4 relative to the
//    reference on random data.
//  - decoded (8-bit-block W of 2^24 weights and more, over decoded_rows(): from
//    16-48 rows by shape up to 256-512): the tile path's numbers from one GEMM
//    that decodes W to fp16 as it reads it (cuda_moe_grouped_gemm.cuh), with no
//    16-bit copy of W first.
// F32 weights, and every type under Rounding::Exact, always take the float
// vector path (float32 all the way: ~1e-6 from the exact reference).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/cuda/cuda_rounded_rows.h"
#include "kernels/kernel.h"

namespace kt::cuda {

class MatmulOp {
 public:
  // Rows up to which the vector paths (in passes of 8 rows) beat the tile path:
  // on an H100, Q4_K 7168x18432 at 32 rows takes 579 us vector, 1128 us tiles;
  // they meet near 64 (kernels/cuda/README.md).
  static constexpr int64_t kVectorRows = 48;
  // 8-bit-block matrices of 2^24 weights and more are decoded inside the GEMM
  // (cuda_moe_grouped_gemm.cuh's kernel over dense rows) over a range of rows
  // (decoded_rows()): the tile path first writes and reads back a 16-bit copy
  // of W (~1.1 ms for V3's 7168 x 18432 whatever the rows up to 256), and the
  // vector path reads W once per 8 rows. H200 (cuda_bench_test C), us, vector
  // / tiles / decoded: V3 up 7168 x 18432 Q4_K at 16 rows 211 / 1173 / 286, 24
  // 314 / 1181 / 293, 64 844 / 1206 / 398, 512 - / 1950 / 1557, 1024 - / 2761
  // / 2708; V3 down 18432 x 7168 Q6_K at 16 620 / 2351 / 551, 512 - / 2394 /
  // 1675, 1024 - / 2466 / 3816; V3 o 16384 x 7168 Q4_K at 32 522 / 2094 / 634,
  // 48 776 / 2119 / 688; 2048 x 10944 Q4_K at 48 137 / 133 / 100, 256 - / 197
  // / 176, 512 - / 263 / 272; 2048 x 3072 at 64 65 / 82 / 72, 128 - / 84 / 101.
  static constexpr int64_t kDecodedMinWeights = int64_t(1) << 24;
  static constexpr int64_t kDecodedLargeWeights = int64_t(1) << 25;
  enum class Path { Auto, Vector, Tiles, Decoded };

  // Binds W (a device pointer, ggml [n_in, n_out] or experts [n_in, n_out,
  // n_expert]) for calls of up to max_rows activation rows. False and *error
  // when the type has no CUDA kernels or a row does not fit the blocks.
  // vector_only: only run_experts() or vector paths will be asked for (no
  // tile scratch).
  bool init(const kern::WeightView& w, int64_t max_rows, kern::Rounding rounding, std::string* error,
            bool vector_only = false);

  // The same op over another matrix of W's type and shape at w (device), e.g.
  // an expert's weights copied into a staging buffer (cuda_moe_streamed.cu).
  MatmulOp at(const void* w) const {
    MatmulOp o = *this;
    o.w_ = static_cast<const uint8_t*>(w);
    o.n_mat_ = 1;
    return o;
  }

  int64_t n_in() const { return n_in_; }
  int64_t n_out() const { return n_out_; }
  // Device scratch a call of up to max_rows rows needs (run()'s scratch).
  uint64_t scratch_bytes() const { return scratch_bytes_; }

  // y [rows][n_out] (row stride ldy) = x [rows][n_in] (row stride ldx) W^T
  // (+ bias [n_out], device). Asynchronous on queue (a cudaStream_t).
  // pre: x's rows already rounded (cuda_rounded_rows.h), taken where the
  // vector int8 path would round x to the same blocks; ignored elsewhere.
  void run(const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy, const float* bias, void* scratch,
           void* queue, Path path = Path::Auto, const RoundedRows* pre = nullptr) const;
  // Whether run() takes pre (the int8 path rounding to pre's blocks).
  bool takes(const RoundedRows& pre) const;

  // Experts: for p < n_pairs, y row p = x row (p / x_div) times the matrix
  // ids[p] (device) of W, zeros where ids[p] < 0. x has n_x_rows rows; vector
  // paths only.
  void run_experts(const float* x, int64_t ldx, int64_t n_x_rows, const int32_t* ids, int64_t n_pairs,
                   int64_t x_div, float* y, int64_t ldy, void* scratch, void* queue) const;

  // Whether run_experts_glu() can take this op as the gate and `up` as the
  // up matrices: both on the int8 path with one rounding of x, of one shape.
  bool glu_pair(const MatmulOp& up) const;
  // Experts' gate and up (this op the gate): for p < n_pairs, y row p =
  // swiglu(x row (p / x_div) times gate matrix ids[p], the same times up
  // matrix ids[p]) (n_out values), zeros where ids[p] < 0. The bits of
  // run_experts() for each and a SwiGLU after, from one rounding of x, both
  // products and the SwiGLU in one launch (a warp a row of both) where
  // one_launch_glu(up): two launches, not five (one with pre: x's rows already
  // rounded, as run()'s); else the SwiGLU in up's epilogue, one launch more.
  // Only where glu_pair(up).
  void run_experts_glu(const MatmulOp& up, const float* x, int64_t ldx, int64_t n_x_rows, const int32_t* ids,
                       int64_t n_pairs, int64_t x_div, float* y, int64_t ldy, void* scratch, void* queue,
                       const RoundedRows* pre = nullptr) const;

  // Dense rows (cuda.matmul_glu, this op the gate): y [rows][n_out] =
  // swiglu(x W_gate^T, x W_up^T), the bits of run() for each and a SwiGLU
  // after, from one rounding of x: one row takes both products and the SwiGLU
  // in one launch where one_launch_glu(up), more rows (or matrices of two
  // types) the gate's, then up's with the SwiGLU in its epilogue. Only where glu_pair(up), rows <= kVectorRows and neither
  // product takes the decoded path.
  void run_glu(const MatmulOp& up, const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy, void* scratch,
               void* queue, const RoundedRows* pre = nullptr) const;

  // y [rows][n_out] = swiglu(x W_gate^T, x W_up^T) for any rows (this op the
  // gate; cuda.matmul_glu, the shared experts of cuda.moe_ffn): one decoded
  // GEMM with the SwiGLU in its epilogue where both products take the decoded
  // path (one type and shape), run_glu where glu_pair(up) and rows <=
  // kVectorRows, else each product's run() (up's into u, [rows][n_out] floats)
  // and a SwiGLU kernel; the same bits either way. path: as run()'s (both
  // products'). Defined in cuda_matmul_glu.cu.
  void run_swiglu(const MatmulOp& up, const float* x, int64_t ldx, int64_t rows, float* y, float* u, void* scratch,
                  void* queue, const RoundedRows* pre = nullptr, Path path = Path::Auto) const;

  // Products of one input by several matrices (cuda.matmul_multi: q and kv_a,
  // or q, k and v): y[i] [rows][ops[i].n_out()] (row stride ldy[i]) = x
  // ops[i]'s W^T (+ bias[i], device, or null). One rounding of x and one
  // launch where share_launch(ops, n), rows <= kVectorRows and no product
  // takes the decoded path, else each op's run(); the same bits either way
  // (each sum is run()'s). scratch: ops[0]'s.
  static constexpr int kMaxProducts = 4;
  static bool share_launch(const MatmulOp* ops, int n);
  static void run_products(const MatmulOp* ops, int n, const float* x, int64_t ldx, int64_t rows, float* const* y,
                           const int64_t* ldy, const float* const* bias, void* scratch, void* queue,
                           const RoundedRows* pre = nullptr);

  // "int8-dp4a", "float", "wmma-fp16", "deq-mma-f16", for Kernel::impl().
  std::string_view impl(int64_t rows) const;

 private:
  bool int8_path() const;
  bool use_tiles(int64_t rows, Path path) const;
  // The float path's products from kSplitGemmMinRows rows on tensor cores
  // (cuda_split_gemm.cuh: float-accurate), where the float path keeps float
  // activations (F32 weights, Rounding::Exact): the router's logits over a
  // prompt, F32 models.
  bool use_split(int64_t rows, Path path) const;
  void run_vector(const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy, const float* bias,
                  const int32_t* ids, int64_t n_pairs, int64_t x_div, void* scratch, void* queue,
                  const RoundedRows* pre = nullptr) const;
  // x's rows in the 8-bit blocks this op's type takes: pre where takes(*pre),
  // else x rounded now into the vector path's scratch (q [rows][n_in], then d).
  RoundedRows round_x(const float* x, int64_t ldx, int64_t rows, void* scratch, void* queue,
                      const RoundedRows* pre = nullptr) const;
  // Whether gate (this op) and up can share one launch: glu_pair(up), and one
  // type and layout, so a block reads both matrices alike.
  bool one_launch_glu(const MatmulOp& up) const;
  // One token a block row (experts' pairs, or one row): swiglu of this op's
  // and up's products from x already rounded, in one launch. Only where
  // one_launch_glu(up).
  void run_int8_glu(const MatmulOp& up, const int8_t* xq, const float* xd, float* y, int64_t ldy, const int32_t* ids,
                    int64_t n_pairs, int64_t x_div, void* queue) const;
  // The int8 products from x already rounded (xq, xd); glu as run_experts_glu's up.
  void run_int8(const int8_t* xq, const float* xd, int64_t rows, float* y, int64_t ldy, const float* bias,
                const int32_t* ids, int64_t n_pairs, int64_t x_div, bool glu, void* queue) const;
  void run_tiles(const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy, const float* bias, void* scratch,
                 void* queue) const;
  // Where the tile and decoded paths' buffers sit in scratch (init sizes it
  // from the same): x as 16 bits (x16_cols() a row), its scales, x's 8-bit
  // rounding (q, d), then, for the tile path only, W's 16-bit chunk.
  struct TileBuffers {
    uint8_t* x16;
    float* inv;
    int8_t* xq;
    float* xd;
    uint8_t* w16;        // chunk_rows_ x k_pad_ halves past the others (none where W is 16-bit: w16_direct())
    uint64_t w16_start;  // its offset: the bytes the decoded path needs
  };
  TileBuffers tile_buffers(void* scratch) const;
  // The 16-bit activations' row stride there: the tile path's padding, or the
  // decoded GEMM's where that path applies (it may be wider).
  int64_t x16_cols() const;
  // F16 / BF16 weights whose rows the GEMM reads in place.
  bool w16_direct() const;
  // Path::Decoded: the tile path's numbers (x rounded and scaled into f16, W
  // decoded to f16, f32 sums) from one kernel reading W once per tile of rows;
  // with up, swiglu(x W^T, x W_up^T) (this op the gate; same type and shape).
  bool use_decoded(int64_t rows, Path path) const;
  // The rows [lo, hi] Path::Auto decodes in the GEMM (lo > hi: none).
  std::pair<int64_t, int64_t> decoded_rows() const;
  void run_decoded(const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy, const float* bias, void* scratch,
                   void* queue, const MatmulOp* up = nullptr) const;
  // Shared memory for one token's int8 products with R rows a warp staged in
  // shared memory (cuda_matmul.cu, mmv_int8_block's S), or 0 where they read
  // from global memory: too wide a block of rows, or misaligned for 16-byte copies.
  uint64_t stage_bytes(int R) const;

  const uint8_t* w_ = nullptr;
  GgmlType type_ = GgmlType::F32;
  int64_t n_in_ = 0, n_out_ = 0, n_mat_ = 1;
  uint64_t row_bytes_ = 0, mat_bytes_ = 0;
  int64_t max_rows_ = 0;
  kern::Rounding rounding_ = kern::Rounding::GgmlCpu;
  int64_t k_pad_ = 0;       // n_in rounded up to the tile depth (32)
  bool decoded_ = false;    // Path::Decoded applies
  int64_t chunk_rows_ = 0;  // rows of W dequantized per tile pass
  uint64_t scratch_bytes_ = 0;
};

}  // namespace kt::cuda
