// Matrix products with GGUF weights on the GPU (cuda_matmul.h): the choice of
// path, the vector paths' launches, and the cuda.matmul kernel. The vector
// paths' kernels are in cuda_matmul_vector.cuh, the tile path in
// cuda_matmul_tiles.cu.
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_matmul_tiles.cuh"
#include "kernels/cuda/cuda_matmul_vector.cuh"
#include "kernels/cuda/cuda_moe_grouped_gemm.cuh"
#include "kernels/cuda/cuda_quant.cuh"
#include "kernels/cuda/cuda_rounding.cuh"
#include "kernels/cuda/cuda_split_gemm.cuh"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/kernel_bind.h"

namespace kt::cuda {

namespace {

// Up to this many outputs, one token takes a block per output (mmv_float_row).
constexpr int64_t kRowBlockOutputs = 512;

// ---- dispatch -------------------------------------------------------------------

// Blocks of one int8 matrix-vector launch above which each warp takes R = 2
// rows: half the blocks, each warp with both rows' loads in flight. V2-Lite's
// experts' products are 352 x 6 = 2112 blocks of 128 threads at 60-70
// registers, about two waves of 8 blocks an SM on 132 SMs (measured, with the
// thresholds tried: kernels/cuda/README.md).
constexpr int64_t kTwoRowBlocks = 1024;
template <int R>
using Rows = std::integral_constant<int, R>;  // rows a warp, as a launch's template argument

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool MatmulOp::init(const kern::WeightView& w, int64_t max_rows, kern::Rounding rounding, std::string* error,
                    bool vector_only) {
  const TypeTraits& tt = type_traits(w.type);
  if (!cuda_type(w.type)) {
    *error = "weight '" + std::string(w.name) + "': type " + std::string(tt.name) + " has no CUDA kernels";
    return false;
  }
  if (w.ne[0] % tt.block_size != 0) {
    *error = "weight '" + std::string(w.name) + "': rows of " + std::to_string(w.ne[0]) + " values do not fill " +
             std::string(tt.name) + " blocks";
    return false;
  }
  if (!aligned16(w.data)) {
    *error = "weight '" + std::string(w.name) + "': device copy is not 16-byte aligned";
    return false;
  }
  w_ = w.bytes();
  type_ = w.type;
  n_in_ = w.ne[0];
  n_out_ = w.ne[1];
  n_mat_ = w.ne[2];
  row_bytes_ = w.nb[1];
  mat_bytes_ = w.nb[2];
  max_rows_ = std::max<int64_t>(max_rows, 1);
  rounding_ = rounding;
  k_pad_ = ceil_div(n_in_, kBK) * kBK;

  uint64_t vec = 0, tiles = 0;
  if (int8_path()) vec = align_up(uint64_t(max_rows_ * n_in_)) + align_up(uint64_t(max_rows_ * (n_in_ / 32)) * 4);
  if (type_ != GgmlType::F32 && max_rows_ > kVectorRows && !vector_only && rounding == kern::Rounding::GgmlCpu) {
    const bool direct = w16_direct();
    chunk_rows_ = direct ? n_out_ : std::max<int64_t>(kBM, int64_t(kTileChunkBytes / (uint64_t(k_pad_) * 2)) / kBM * kBM);
    chunk_rows_ = std::min(chunk_rows_, ceil_div(n_out_, kBM) * kBM);
    decoded_ = decoded_gemm_applies(type_, n_in_);
    tiles = tile_buffers(nullptr).w16_start + (direct ? 0 : align_up(uint64_t(chunk_rows_ * k_pad_) * 2));
  }
  scratch_bytes_ = std::max(vec, tiles);
  return true;
}

bool MatmulOp::int8_path() const { return !float_type(type_) && rounding_ == kern::Rounding::GgmlCpu; }

bool MatmulOp::use_tiles(int64_t rows, Path path) const {
  if (type_ == GgmlType::F32 || max_rows_ <= kVectorRows || chunk_rows_ == 0) return false;
  if (path == Path::Tiles) return true;
  if (path == Path::Vector) return false;
  // Rounding::Exact keeps float activations and float products (exact, slower).
  if (rounding_ == kern::Rounding::Exact) return false;
  return rows > kVectorRows;
}

bool MatmulOp::use_split(int64_t rows, Path path) const {
  // Its blocks are 64 rows x 128 outputs, each walking the whole n_in: with
  // few of them the float kernel wins. H200 (cuda_bench_test H), float ->
  // split: 2048x64 at 2048 rows 112 -> 158 us, 7168x256 at 512 rows 372 -> 770,
  // at 2048 rows 2452 -> 804, 2048x1408 at 512 rows 535 -> 226; from
  // rows x n_out = 2^18 it wins every case measured.
  return path != Path::Vector && !int8_path() && (type_ == GgmlType::F32 || rounding_ == kern::Rounding::Exact) &&
         rows >= kSplitGemmMinRows && rows * n_out_ >= (int64_t(1) << 18);
}

std::pair<int64_t, int64_t> MatmulOp::decoded_rows() const {
  const int64_t weights = n_in_ * n_out_;
  if (!decoded_ || weights < kDecodedMinWeights) return {1, 0};
  // Below: the vector path, whose Q6_K products are its slowest (7 TFLOP/s
  // against Q4_K's 14-20) and whose wide matrices fill the GPU best per row.
  const bool large = weights >= kDecodedLargeWeights;
  const int64_t lo = large && type_ == GgmlType::Q6_K ? 16 : large && n_out_ >= 16384 ? 24 : kVectorRows;
  // Above: the tile path, whose GEMM gains on the decoding's repeated work.
  return {lo, large ? 512 : 256};
}

bool MatmulOp::use_decoded(int64_t rows, Path path) const {
  if (!decoded_ || path == Path::Vector || path == Path::Tiles) return false;
  if (path == Path::Decoded) return true;
  const auto [lo, hi] = decoded_rows();
  return rows >= lo && rows <= hi;
}

void MatmulOp::run_decoded(const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy, const float* bias,
                           void* scratch, void* queue, const MatmulOp* up) const {
  auto s = static_cast<cudaStream_t>(queue);
  const TileBuffers b = tile_buffers(scratch);
  auto* x16 = reinterpret_cast<__half*>(b.x16);
  rows_to_f16(x, ldx, rows, n_in_, decoded_k_pad(n_in_), act_block(type_), b.xq, b.xd, x16, b.inv, s);
  run_decoded_gemm(type_, w_, up ? up->w_ : nullptr, row_bytes_, n_in_, n_out_, x16, b.inv, rows, y, ldy, bias, s);
}

std::string_view MatmulOp::impl(int64_t rows) const {
  if (use_decoded(rows, Path::Auto)) return "deq-mma-f16";
  if (use_tiles(rows, Path::Auto)) return type_ == GgmlType::BF16 ? "wmma-bf16" : "wmma-fp16";
  if (use_split(rows, Path::Auto)) return "split-f16";
  return int8_path() ? "int8-dp4a" : "float";
}

void MatmulOp::run(const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy, const float* bias,
                   void* scratch, void* queue, Path path, const RoundedRows* pre) const {
  if (rows <= 0) return;
  if (use_decoded(rows, path)) return run_decoded(x, ldx, rows, y, ldy, bias, scratch, queue);
  if (use_tiles(rows, path)) return run_tiles(x, ldx, rows, y, ldy, bias, scratch, queue);
  if (use_split(rows, path)) {
    SplitGemmArgs p;
    p.x = x;
    p.x_stride = ldx;
    p.w = w_;
    p.row_bytes = row_bytes_;
    p.K = int(n_in_);
    p.N = int(n_out_);
    p.y = y;
    p.y_stride = ldy;
    p.bias = bias;
    p.n_rows = rows;
    if (split_gemm_applies(p)) return launch_split_gemm(p, type_, 1, queue);
  }
  run_vector(x, ldx, rows, y, ldy, bias, nullptr, 0, 1, scratch, queue, pre);
}

bool MatmulOp::takes(const RoundedRows& pre) const {
  return pre.q && int8_path() && act_block(type_) == pre.act;
}

void MatmulOp::run_experts(const float* x, int64_t ldx, int64_t n_x_rows, const int32_t* ids, int64_t n_pairs,
                           int64_t x_div, float* y, int64_t ldy, void* scratch, void* queue) const {
  if (n_pairs <= 0) return;
  run_vector(x, ldx, n_x_rows, y, ldy, nullptr, ids, n_pairs, x_div, scratch, queue);
}

bool MatmulOp::glu_pair(const MatmulOp& up) const {
  return int8_path() && up.int8_path() && act_block(type_) == act_block(up.type_) && n_in_ == up.n_in_ &&
         n_out_ == up.n_out_;
}

// Rows of x rounded to 8-bit blocks of `act` values (32: Q8_0, 256: Q8_K),
// one warp per block: xq [rows][n] int8, xd [rows][n / act] scales.
__global__ void quantize_q8(const float* __restrict__ x, int64_t ldx, int64_t n, int act, int8_t* __restrict__ xq,
                            float* __restrict__ xd) {
  wait_for_inputs();
  const int64_t r = blockIdx.y, blk = blockIdx.x;
  round_block_q8_warp(x + r * ldx + blk * act, act, xq + r * n + blk * act, xd + r * (n / act) + blk);
}

void quantize_rows(const float* x, int64_t ldx, int64_t rows, int64_t n, int act, int8_t* xq, float* xd,
                   cudaStream_t s) {
  launch(quantize_q8, dim3(unsigned(n / act), unsigned(rows)), 32, 0, s, x, ldx, n, act, xq, xd);
  check_launch("cuda matmul (8-bit activations)", s);
}

void MatmulOp::run_vector(const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy, const float* bias,
                          const int32_t* ids, int64_t n_pairs, int64_t x_div, void* scratch, void* queue,
                          const RoundedRows* pre) const {
  auto s = static_cast<cudaStream_t>(queue);
  const dim3 block(32 * kRowsPerBlock);
  const unsigned gx = unsigned(ceil_div(n_out_, kRowsPerBlock));
  if (int8_path()) {
    const RoundedRows r = round_x(x, ldx, rows, scratch, queue, pre);
    run_int8(r.q, r.d, rows, y, ldy, bias, ids, n_pairs, x_div, false, queue);
    return;
  }
  const int xround = rounding_ == kern::Rounding::GgmlCpu
                         ? (type_ == GgmlType::F16 ? 1 : type_ == GgmlType::BF16 ? 2 : 0)
                         : 0;
  const bool xvec = ldx % 4 == 0 && aligned16(x);
  with_type(type_, [&](auto tc) {
    constexpr GgmlType T = decltype(tc)::value;
    auto go = [&](auto vc) {
      constexpr int V = decltype(vc)::value;
      if (ids) {
        launch(mmv_float<T, 1, V>, dim3(gx, unsigned(n_pairs)), block, 0, s, w_, row_bytes_, mat_bytes_, n_out_, n_in_,
               x, ldx, 1, xround, y, ldy, nullptr, ids, x_div);
      } else if (rows == 1 && n_out_ <= kRowBlockOutputs) {
        launch(mmv_float_row<T, V>, unsigned(n_out_), 128, 0, s, w_, row_bytes_, n_in_, x, xround, y, bias);
      } else if (rows == 1) {
        launch(mmv_float<T, 1, V>, dim3(gx, 1), block, 0, s, w_, row_bytes_, mat_bytes_, n_out_, n_in_, x, ldx, 1,
               xround, y, ldy, bias, nullptr, 1);
      } else {
        launch(mmv_float<T, 8, V>, dim3(gx, unsigned(ceil_div(rows, 8))), block, 0, s, w_, row_bytes_, mat_bytes_,
               n_out_, n_in_, x, ldx, int(rows), xround, y, ldy, bias, nullptr, 1);
      }
    };
    if constexpr (T == GgmlType::F32) {
      if (xvec && n_in_ % 4 == 0)
        go(std::integral_constant<int, 4>{});
      else
        go(std::integral_constant<int, 1>{});
    } else if constexpr (T == GgmlType::F16 || T == GgmlType::BF16) {
      if (xvec && n_in_ % 8 == 0)
        go(std::integral_constant<int, 8>{});
      else
        go(std::integral_constant<int, 1>{});
    } else {
      go(std::integral_constant<int, 1>{});
    }
  });
  check_launch("cuda matmul (float)", queue);
}

// Staged blocks of rows up to this many bytes: the default dynamic shared
// memory of a block, and at least 4 blocks an SM (of the H100/H200's 228 KB).
constexpr uint64_t kStageMaxBytes = 48 << 10;

// IQ4_XS and Q5_0 are left out, measured slower staged: V3's 7168 x 18432
// IQ4_XS 33.7 -> 36.5 us (its lookups, not its loads, bound it), V2-Lite's
// 10944 x 2048 Q5_0 16.5 -> 18.6.
uint64_t MatmulOp::stage_bytes(int R) const {
  if (type_ == GgmlType::IQ4_XS || type_ == GgmlType::Q5_0) return 0;
  const uint64_t b = uint64_t(kRowsPerBlock) * uint64_t(R) * row_bytes_;
  const bool aligned = reinterpret_cast<uintptr_t>(w_) % 16 == 0 && (n_mat_ <= 1 || mat_bytes_ % 16 == 0) && b % 16 == 0;
  return stage_enabled() && aligned && b <= kStageMaxBytes ? b : 0;
}

void MatmulOp::run_int8(const int8_t* xq, const float* xd, int64_t rows, float* y, int64_t ldy, const float* bias,
                        const int32_t* ids, int64_t n_pairs, int64_t x_div, bool glu, void* queue) const {
  auto s = static_cast<cudaStream_t>(queue);
  const dim3 block(32 * kRowsPerBlock);
  const unsigned gx = unsigned(ceil_div(n_out_, kRowsPerBlock));
  // One token a block row (experts' pairs, or a single row): two rows a warp
  // where one would take more than a wave of blocks.
  const unsigned gy1 = ids ? unsigned(n_pairs) : 1u;
  const bool two = (ids || rows == 1) && int64_t(gx) * gy1 > kTwoRowBlocks;
  const unsigned gx2 = unsigned(ceil_div(n_out_, 2 * kRowsPerBlock));
  with_quant_type(type_, [&](auto tc) {
    constexpr GgmlType T = decltype(tc)::value;
    if (ids || rows == 1) {
      const float* b = ids ? nullptr : bias;
      const int64_t xdv = ids ? x_div : 1;
      const uint64_t sb = stage_bytes(two ? 2 : 1);
      auto one = [&](auto rc, auto sc) {  // R rows a warp, staged or not
        constexpr int R = decltype(rc)::value;
        constexpr bool S = decltype(sc)::value;
        launch(glu ? mmv_int8<T, 1, true, R, S> : mmv_int8<T, 1, false, R, S>, dim3(R == 2 ? gx2 : gx, gy1), block,
               S ? sb : 0, s, w_, row_bytes_, mat_bytes_, n_out_, n_in_, xq, xd, 1, y, ldy, b, ids, xdv);
      };
      if (two)
        sb ? one(Rows<2>{}, std::true_type{}) : one(Rows<2>{}, std::false_type{});
      else
        sb ? one(Rows<1>{}, std::true_type{}) : one(Rows<1>{}, std::false_type{});
    } else {
      launch(glu ? mmv_int8<T, 8, true> : mmv_int8<T, 8>, dim3(gx, unsigned(ceil_div(rows, 8))), block, 0, s, w_,
             row_bytes_, mat_bytes_, n_out_, n_in_, xq, xd, int(rows), y, ldy, bias, nullptr, 1);
    }
  });
  check_launch("cuda matmul (int8)", queue);
}

bool MatmulOp::one_launch_glu(const MatmulOp& up) const {
  return glu_pair(up) && type_ == up.type_ && row_bytes_ == up.row_bytes_ && mat_bytes_ == up.mat_bytes_;
}

// One token a block row: gate and up in one launch (mmv_int8_glu), a warp a row
// of both, staged where both matrices' blocks of rows can be (a block's rows of
// each, 16-byte aligned, one after the other).
void MatmulOp::run_int8_glu(const MatmulOp& up, const int8_t* xq, const float* xd, float* y, int64_t ldy,
                            const int32_t* ids, int64_t n_pairs, int64_t x_div, void* queue) const {
  auto s = static_cast<cudaStream_t>(queue);
  const dim3 grid(unsigned(ceil_div(n_out_, kRowsPerBlock)), ids ? unsigned(n_pairs) : 1u);
  const uint64_t b1 = stage_bytes(1);
  const uint64_t sb = b1 && up.stage_bytes(1) == b1 && 2 * b1 <= kStageMaxBytes ? 2 * b1 : 0;
  const int64_t xdv = ids ? x_div : 1;
  with_quant_type(type_, [&](auto tc) {
    constexpr GgmlType T = decltype(tc)::value;
    launch(sb ? mmv_int8_glu<T, true> : mmv_int8_glu<T, false>, grid, 32 * kRowsPerBlock, sb, s, w_, up.w_,
           row_bytes_, mat_bytes_, n_out_, n_in_, xq, xd, y, ldy, ids, xdv);
  });
  check_launch("cuda matmul (int8, gate and up)", queue);
}

void MatmulOp::run_experts_glu(const MatmulOp& up, const float* x, int64_t ldx, int64_t n_x_rows, const int32_t* ids,
                               int64_t n_pairs, int64_t x_div, float* y, int64_t ldy, void* scratch, void* queue,
                               const RoundedRows* pre) const {
  if (n_pairs <= 0) return;
  const RoundedRows r = round_x(x, ldx, n_x_rows, scratch, queue, pre);
  if (one_launch_glu(up)) return run_int8_glu(up, r.q, r.d, y, ldy, ids, n_pairs, x_div, queue);
  run_int8(r.q, r.d, n_x_rows, y, ldy, nullptr, ids, n_pairs, x_div, false, queue);
  up.run_int8(r.q, r.d, n_x_rows, y, ldy, nullptr, ids, n_pairs, x_div, true, queue);
}

void MatmulOp::run_glu(const MatmulOp& up, const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy,
                       void* scratch, void* queue, const RoundedRows* pre) const {
  if (rows <= 0) return;
  const RoundedRows r = round_x(x, ldx, rows, scratch, queue, pre);  // glu_pair: up takes the same blocks
  if (rows == 1 && one_launch_glu(up)) return run_int8_glu(up, r.q, r.d, y, ldy, nullptr, 0, 1, queue);
  run_int8(r.q, r.d, rows, y, ldy, nullptr, nullptr, 0, 1, false, queue);
  up.run_int8(r.q, r.d, rows, y, ldy, nullptr, nullptr, 0, 1, true, queue);
}

bool MatmulOp::share_launch(const MatmulOp* ops, int n) {
  if (n < 1 || n > kMaxProducts) return false;
  for (int i = 0; i < n; ++i)
    if (!ops[i].int8_path() || ops[i].type_ != ops[0].type_ || ops[i].n_in_ != ops[0].n_in_ ||
        ops[i].max_rows_ != ops[0].max_rows_)
      return false;
  return true;
}

void MatmulOp::run_products(const MatmulOp* ops, int n, const float* x, int64_t ldx, int64_t rows, float* const* y,
                            const int64_t* ldy, const float* const* bias, void* scratch, void* queue,
                            const RoundedRows* pre) {
  if (rows <= 0 || n <= 0) return;
  bool decoded = false;  // a product run() decodes in the GEMM: each its own run(), as the separate calls
  for (int i = 0; i < n; ++i) decoded = decoded || ops[i].use_decoded(rows, Path::Auto);
  if (!share_launch(ops, n) || rows > kVectorRows || decoded) {
    for (int i = 0; i < n; ++i) ops[i].run(x, ldx, rows, y[i], ldy[i], bias[i], scratch, queue, Path::Auto, pre);
    return;
  }
  const MatmulOp& op0 = ops[0];
  const RoundedRows r = op0.round_x(x, ldx, rows, scratch, queue, pre);
  // Two rows a warp where one token's blocks would pass a wave (run_int8's rule).
  int64_t blocks1 = 0;
  for (int i = 0; i < n; ++i) blocks1 += ceil_div(ops[i].n_out_, kRowsPerBlock);
  const int R = rows == 1 && blocks1 > kTwoRowBlocks ? 2 : 1;
  Products p{};
  p.n = n;
  unsigned blocks = 0;
  for (int i = 0; i < n; ++i) {
    p.w[i] = ops[i].w_;
    p.y[i] = y[i];
    p.ldy[i] = ldy[i];
    p.bias[i] = bias[i];
    p.n_out[i] = ops[i].n_out_;
    p.first_block[i] = blocks;
    blocks += unsigned(ceil_div(ops[i].n_out_, int64_t(kRowsPerBlock) * R));
  }
  // Staged where every matrix's blocks of rows can be (one type and width:
  // only their addresses differ).
  uint64_t sb = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t b = ops[i].stage_bytes(R);
    sb = i == 0 || b == sb ? b : 0;
    if (!sb) break;
  }
  auto s = static_cast<cudaStream_t>(queue);
  const dim3 block(32 * kRowsPerBlock);
  with_quant_type(op0.type_, [&](auto tc) {
    constexpr GgmlType T = decltype(tc)::value;
    auto one = [&](auto rc, auto sc) {  // one token: R rows a warp, staged or not
      constexpr int kR = decltype(rc)::value;
      constexpr bool kS = decltype(sc)::value;
      launch(mmv_int8_multi<T, 1, kR, kS>, dim3(blocks), block, kS ? sb : 0, s, p, op0.row_bytes_, op0.n_in_, r.q,
             r.d, 1);
    };
    if (rows > 1)
      launch(mmv_int8_multi<T, 8, 1>, dim3(blocks, unsigned(ceil_div(rows, 8))), block, 0, s, p, op0.row_bytes_,
             op0.n_in_, r.q, r.d, int(rows));
    else if (R == 2)
      sb ? one(Rows<2>{}, std::true_type{}) : one(Rows<2>{}, std::false_type{});
    else
      sb ? one(Rows<1>{}, std::true_type{}) : one(Rows<1>{}, std::false_type{});
  });
  check_launch("cuda matmul (int8, several matrices)", queue);
}

RoundedRows MatmulOp::round_x(const float* x, int64_t ldx, int64_t rows, void* scratch, void* queue,
                              const RoundedRows* pre) const {
  if (pre && takes(*pre)) return *pre;
  auto* q = static_cast<int8_t*>(scratch);
  auto* d = reinterpret_cast<float*>(static_cast<uint8_t*>(scratch) + align_up(uint64_t(max_rows_ * n_in_)));
  quantize_rows(x, ldx, rows, n_in_, act_block(type_), q, d, static_cast<cudaStream_t>(queue));
  return {q, d, act_block(type_)};
}

}  // namespace kt::cuda

// ---- cuda.matmul ------------------------------------------------------------------

namespace kt::kern {

namespace {

class CudaMatmul final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  CudaMatmul(cuda::MatmulOp op, int device, bool bias, int pre_act)
      : op_(op), device_(device), bias_(bias), pre_act_(pre_act) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act &x = a.in[0], &y = a.out[0];
    cuda::RoundedRows pre;
    if (pre_act_) pre = cuda::rounded_rows(a.in[1].data, a.in[1].max_rows, x.cols, pre_act_);
    op_.run(x.f32(), x.cols, x.rows, y.f32(), y.cols, bias_ ? a.weights[1].f32() : nullptr, cuda::workspace(device_),
            a.queue, cuda::MatmulOp::Path::Auto, pre_act_ ? &pre : nullptr);
  }
  std::string_view impl() const override { return op_.impl(1); }

 private:
  cuda::MatmulOp op_;
  int device_;
  bool bias_;
  int pre_act_;  // x's rows also come rounded (input 1): their blocks, else 0
};

}  // namespace

int bind_rounded_rows(Binder& b, const CallSpec& s, size_t k) {
  if (s.in.size() <= k) return 0;
  const int act = cuda::rounded_rows_act(s.in[0].cols, s.in[k].cols);
  b.in_type(k, GgmlType::I32);
  b.check(act != 0, "input ", k, " (rounded rows) has ", s.in[k].cols, " words a row, not ",
          cuda::rounded_rows_cols(s.in[0].cols, 256), " or ", cuda::rounded_rows_cols(s.in[0].cols, 32));
  b.check(s.in[k].max_rows >= s.in[0].max_rows, "input ", k, " (rounded rows) holds ", s.in[k].max_rows,
          " rows, input 0 ", s.in[0].max_rows);
  return act;
}

std::unique_ptr<Kernel> make_cuda_matmul(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.arity(s.in.size() == 2 ? 2 : 1, 1, 1, 2)) return nullptr;
  const int pre_act = bind_rounded_rows(b, s, 1);
  const WeightView& w = s.weights[0];
  b.weight_shape(0, s.in[0].cols, s.out[0].cols);
  b.in_type(0, GgmlType::F32);
  b.out_type(0, GgmlType::F32);
  if (s.weights.size() > 1) {
    b.check(s.weights[1].type == GgmlType::F32, "bias '", std::string(s.weights[1].name), "' must be F32");
    b.weight_shape(1, w.ne[1]);
  }
  if (!b.ok()) return nullptr;
  cuda::MatmulOp op;
  if (!op.init(w, s.in[0].max_rows, s.rounding, error)) return nullptr;
  if (!cuda::reserve_workspace(s.device, op.scratch_bytes(), error)) return nullptr;
  return std::make_unique<CudaMatmul>(op, s.device, s.weights.size() > 1, pre_act);
}

}  // namespace kt::kern
