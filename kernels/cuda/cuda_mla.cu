// DeepSeek's multi-head latent attention on the GPU: cuda.mla_attention_absorbed
// and cuda.mla_attention, both computed in absorbed form over the latent cache
// (DeepSeek-V2 paper, section 2.1.2), which is the same function as the
// decompressed form up to rounding and needs no per-token K/V:
//   1. q_abs[h] = W_K_h^T q_nope[h] (r values), next to q_pe[h]: [T][H][r + dr];
//   2. split-K attention of every head over the cached [latent, rope key] rows,
//      the latents as values (cuda_attention.cuh): o_lat [T][H][r];
//   3. out[h] = W_V_h o_lat[h].
// kv_b (or k_b + v_b) stays in its GGUF type; steps 1 and 3 decode its values
// as they read them (cuda_quant.cuh deq1), so no float copy of it is kept.
// Rounding::GgmlCpu rounds each cached latent as kv_b's (v_b's) products see it
// (ops_ref.h round_activations), as the CPU kernel does.
//
// cuda.mla_attention_store (kt-fuse-calls) is cuda.rope_mla_store then the
// absorbed attention in one call: inputs q (unroped) and kv_a, the last weight
// kv_a's norm; one decoding token's rope, cache store and step 1 share one
// launch (mla_prepare_one).
//
// Compared with cpu.mla_attention under GgmlCpu (which rounds its decompressed
// K, V, queries and probabilities to F16 as llama.cpp's F16 cache would), the
// absorbed form has no such rounding: the two differ by F16 noise (~1e-3).
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_attention.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_dot32.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_latent_rounding.cuh"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_mla_kernels.cuh"
#include "kernels/cuda/cuda_rope.cuh"
#include "kernels/cuda/cuda_split_gemm.cuh"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cpu/rope_params.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

namespace {

constexpr uint64_t kMlaChunkBytes = 64ull << 20;  // q_abs + o_lat per pass
// Most GPU memory a layer's latents rounded once a step may take (the
// workspace, shared by the layers, which the plan's memory check covers only
// within its 512 MB reserve): 576 bytes a position for r = 512, so contexts
// up to 116k positions; longer ones keep rounding in the tiles.
constexpr uint64_t kLatScratchBytes = 64ull << 20;
// Fewest blocks reading each tile (tokens x head groups) for which a step's
// latents are rounded once for all of them (CudaMla::lat_rounded).
constexpr int64_t kRoundOnceMin = 8;

class CudaMla final : public Kernel {
 public:
  struct Setup {
    int device;
    cuda::MlaDims m;
    bool split;  // k_b + v_b rather than kv_b
    GgmlType k_type, v_type;
    uint64_t k_row, k_mat, v_row, v_mat;
    cuda::AttnArgs attn;
    int64_t chunk_tokens;
    uint64_t partial_floats;
    // cuda.mla_attention_store: q's rope and kv_a's cache store come first
    // (input 1 kv_a, the last weight its norm), in one launch with q_abs for
    // a decoding token.
    bool store = false;
    float eps = 0.0f;
    cuda::RopeArgs rope{};
    // Where the step's latents, rounded once (cuda::launch_round_latents), go
    // in the workspace (floats from its start); 0: each block of the split
    // kernel rounds its own (no rounding, or a cache too long to hold so).
    uint64_t lat_offset = 0;
  };
  explicit CudaMla(Setup s) : s_(s) {}

  void run(const CallArgs& a) override {
    cuda::use_device(s_.device);
    const Act &q = a.in[0], &y = a.out[0];
    if (q.rows == 0) return;
    auto stream = static_cast<cudaStream_t>(a.queue);
    const cuda::DeviceStep st = cuda::upload_step(*a.step, a.queue);
    const cuda::MlaDims& m = s_.m;
    const int64_t qc = m.r + m.dr;
    auto* ws = static_cast<float*>(cuda::workspace(s_.device));
    float* qcat = ws;
    float* olat = qcat + s_.chunk_tokens * m.H * qc;
    float* partial = olat + s_.chunk_tokens * m.H * m.r;
    const uint8_t* wk = a.weights[0].bytes();
    const uint8_t* wv = s_.split ? a.weights[1].bytes() : wk;
    const float* qf = q.f32();
    // The latents every head group and token reads, rounded once after the
    // store: in the preparation's launch (one decoding token with k_b) or in
    // one of their own.
    int8_t* lat_q = nullptr;
    float* lat_d = nullptr;
    if (lat_rounded(a)) {
      lat_q = reinterpret_cast<int8_t*>(ws + s_.lat_offset);
      lat_d = reinterpret_cast<float*>(lat_q + a.kv->n_ctx * m.r);
    }
    bool prepared = false;  // qcat of the first chunk written (and the latents rounded), with the store
    if (s_.store) prepared = store(a, st, qcat, partial + s_.partial_floats, &qf, lat_q, lat_d);
    if (lat_q && !prepared) {
      cuda::AttnArgs at = s_.attn;
      at.k = a.kv->k;
      at.pos = st.pos;
      at.slot = st.slot;
      cuda::launch_round_latents(at, a.kv->type, q.rows, max_pos(a, 0, q.rows), lat_q, lat_d, a.queue);
    }
    // A decode token takes the kernels' one-token variants (mla_q_abs_split, mla_out).
    using One = std::integral_constant<int, 1>;
    using Tok = std::integral_constant<int, cuda::kTok>;
    for (int64_t t0 = 0; t0 < q.rows; t0 += s_.chunk_tokens) {
      const int64_t nt = std::min(s_.chunk_tokens, q.rows - t0);
      const unsigned tok_blocks = unsigned(cuda::ceil_div(nt, cuda::kTok));
      const float* q_t0 = qf + t0 * q.cols;
      const cuda::SplitGemmArgs qp = q_abs_args(q_t0, nt, q.cols, wk, qcat);
      if (!prepared && prompt_gemm(qp)) {
        cuda::launch_split_gemm(qp, s_.k_type, m.H, stream);
      } else if (!prepared) {
        cuda::with_type(s_.k_type, [&](auto tc) {
          constexpr GgmlType T = decltype(tc)::value;
          if (s_.split) {
            const dim3 grid(unsigned(cuda::ceil_div(int64_t(m.H) * qc, 4)), tok_blocks);
            auto go = [&](auto ntc) {
              cuda::launch(cuda::mla_q_abs_split<T, decltype(ntc)::value>, grid, 128, 0, stream, q_t0, nt, m, wk,
                           s_.k_row, s_.k_mat, qcat);
            };
            const int L = cuda::dot32_lanes(m.dn);
            if (nt == 1 && L)
              cuda::launch(cuda::mla_q_abs_one<T>, unsigned(cuda::ceil_div(int64_t(m.H) * qc, 4 * (32 / L))), 128, 0,
                           stream, q_t0, m, wk, s_.k_row, s_.k_mat, qcat, L);
            else
              nt == 1 ? go(One{}) : go(Tok{});
          } else {
            const dim3 grid(unsigned(cuda::ceil_div(qc, 128)), unsigned(m.H), tok_blocks);
            cuda::launch(cuda::mla_q_abs<T>, grid, dim3(128, cuda::kQabsSplit), 0, stream, q_t0, nt, m, wk, s_.k_row,
                         qcat);
          }
        });
      }
      prepared = false;
      cuda::check_launch("cuda mla (q_abs)", a.queue);

      cuda::AttnArgs at = s_.attn;
      at.q = qcat;
      at.k = a.kv->k;
      at.v = a.kv->v;
      at.pos = st.pos + t0;
      at.slot = st.slot + t0;
      at.out = olat;
      at.partial = partial;
      at.lat_q = lat_q;
      at.lat_d = lat_d;
      split(at, a, t0, nt);
      cuda::launch_attention(at, a.kv->type, true, nt, a.queue);

      const cuda::SplitGemmArgs vp = w_v_args(olat, nt, wv, y.row(t0), y.cols);
      if (prompt_gemm(vp)) {
        cuda::launch_split_gemm(vp, s_.v_type, m.H, stream);
      } else {
        cuda::with_type(s_.v_type, [&](auto tc) {
          constexpr GgmlType T = decltype(tc)::value;
          const dim3 grid(unsigned(cuda::ceil_div(int64_t(m.H) * m.dv, 4)), tok_blocks);
          auto go = [&](auto split, auto ntc) {
            cuda::launch(cuda::mla_out<T, decltype(split)::value, decltype(ntc)::value>, grid, 128, 0, stream, olat, nt,
                         m, wv, s_.v_row, s_.v_mat, y.row(t0), y.cols);
          };
          const int L = cuda::dot32_lanes(m.r);
          if (nt == 1 && L) {
            const int gr = cuda::group_rows(int64_t(m.H) * m.dv, m.dv, 4 * (32 / L), cuda::sm_count(s_.device));
            const unsigned blocks = unsigned(cuda::ceil_div(int64_t(m.H) * m.dv, 4 * (32 / L) * gr));
            auto out_one = [&](auto grc) {
              constexpr int G = decltype(grc)::value;
              if (s_.split)
                cuda::launch(cuda::mla_out_one<T, true, G>, blocks, 128, 0, stream, olat, m, wv, s_.v_row, s_.v_mat,
                             y.row(t0), L);
              else
                cuda::launch(cuda::mla_out_one<T, false, G>, blocks, 128, 0, stream, olat, m, wv, s_.v_row, s_.v_mat,
                             y.row(t0), L);
            };
            gr == 1 ? out_one(std::integral_constant<int, 1>{})
                    : out_one(std::integral_constant<int, cuda::kRowsAGroup>{});
          } else if (s_.split) {
            nt == 1 ? go(std::true_type{}, One{}) : go(std::true_type{}, Tok{});
          } else {
            nt == 1 ? go(std::false_type{}, One{}) : go(std::false_type{}, Tok{});
          }
        });
      }
      cuda::check_launch("cuda mla (W_V)", a.queue);
    }
  }
  std::string_view impl() const override { return "absorbed split-k"; }
  bool capturable(const CallArgs&) const override { return true; }
  // The cache's split into blocks follows the step's furthest position.
  uint64_t graph_key(const CallArgs& a) const override {
    uint64_t key = 0;
    for (int64_t t0 = 0; t0 < a.in[0].rows; t0 += s_.chunk_tokens) {
      cuda::AttnArgs at = s_.attn;
      split(at, a, t0, std::min(s_.chunk_tokens, a.in[0].rows - t0));
      key = key * 0x100000001B3ull ^ (uint64_t(at.gh) << 48 | uint64_t(at.n_split) << 24 | uint32_t(at.tiles_per_split));
    }
    // The rounding's grid follows the horizon (launch_round_latents).
    if (lat_rounded(a)) key = key * 0x100000001B3ull ^ uint64_t(cuda::split_horizon(max_pos(a, 0, a.in[0].rows)));
    return key;
  }

 private:
  // cuda.mla_attention_store's first part: kv_a's rows (input 1) into the
  // cache and q's rope. One token with k_b: one launch (mla_prepare_one)
  // that also writes q_abs into qcat: true. Otherwise cuda.rope_mla_store's
  // kernel ropes q into qr (the workspace past the attention's partials) and
  // *q points there: false, q_abs still to come.
  bool store(const CallArgs& a, const cuda::DeviceStep& st, float* qcat, float* qr, const float** q, int8_t* lat_q,
             float* lat_d) const {
    const Act &x = a.in[0], &kv_a = a.in[1];
    const cuda::MlaDims& m = s_.m;
    const KvView& kv = *a.kv;
    const float* norm = a.weights.back().f32();
    auto stream = static_cast<cudaStream_t>(a.queue);
    bool one = false;
    cuda::with_cache_type(kv.type, [&](auto ec) {
      using E = decltype(ec);
      const cuda::MlaStore<E> sa = cuda::mla_store_args<E>(kv_a.f32(), kv_a.cols, kv, norm, s_.eps, s_.rope);
      if (prepare_one(a)) {
        const int L = cuda::dot32_lanes(m.dn);  // q_abs's rows a warp: mla_prepare_one
        const int64_t a_block = cuda::kStoreThreads / 32 * (L ? 32 / L : 1);  // q_abs's rows a block, one a group
        const int gr = L ? cuda::group_rows(int64_t(m.H) * m.r, m.r, a_block, cuda::sm_count(s_.device)) : 1;
        const int round_b0 = int(1 + m.H + cuda::ceil_div(int64_t(m.H) * m.r, a_block * gr));
        // The latents' rounding: blocks up to the split's horizon (the grid
        // changes only every 256 steps), the rows before the token's.
        const int round_blocks =
            lat_q ? int(cuda::ceil_div(cuda::split_horizon(a.step->pos[0]) + 1, cuda::kRoundRows)) : 0;
        const size_t smem = size_t(std::max(m.dr, lat_q ? cuda::kRoundRows * m.r : 0)) * 4;
        cuda::with_type(s_.k_type, [&](auto tc) {
          constexpr GgmlType T = decltype(tc)::value;
          auto prepare = [&](auto grc) {
            cuda::launch(cuda::mla_prepare_one<T, E, decltype(grc)::value>, unsigned(round_b0 + round_blocks),
                         cuda::kStoreThreads, smem, stream, x.f32(), m, a.weights[0].bytes(), s_.k_row, s_.k_mat,
                         qcat, s_.rope, sa, st.slot, st.pos, lat_q, lat_d, s_.attn.round_lat, round_b0);
          };
          gr == 1 ? prepare(std::integral_constant<int, 1>{})
                  : prepare(std::integral_constant<int, cuda::kRowsAGroup>{});
        });
        one = true;
      } else {
        cuda::launch_rope_mla_store<E>(x.f32(), qr, x.rows, x.cols, m.H, m.dn + m.dr, m.dn, s_.rope, sa, st.slot,
                                       st.pos, stream);
        *q = qr;
      }
    });
    cuda::check_launch("cuda mla (rope and cache store)", a.queue);
    return one;
  }

  // A prompt's chunk takes steps 1 and 3 on tensor cores (cuda_split_gemm.cuh)
  // unless KT_CUDA_MLA_MMA=0.
  static bool prompt_gemm(const cuda::SplitGemmArgs& p) {
    return cuda::mla_tensor_cores() && cuda::split_gemm_applies(p);
  }
  // Step 1 (q_abs, and q_pe beside it in qcat) as the tensor-core products
  // take it: q's rows of q_cols values (a head's d_nope then d_rope).
  cuda::SplitGemmArgs q_abs_args(const float* q, int64_t nt, int64_t q_cols, const uint8_t* wk, float* qcat) const {
    const cuda::MlaDims& m = s_.m;
    cuda::SplitGemmArgs p;
    p.x = q;
    p.x_stride = q_cols;
    p.x_head_stride = m.dn + m.dr;
    p.K = m.dn;
    p.N = m.r;
    p.w = wk;
    p.row_bytes = s_.k_row;
    // k_b: row (c, h) holds W_K_h[.][c]; kv_b: head h's rows j hold W_K_h[j][.].
    p.mat_bytes = s_.split ? s_.k_mat : uint64_t(m.dn + m.dv) * s_.k_row;
    p.kn = !s_.split;
    p.y = qcat;
    p.y_stride = int64_t(m.H) * (m.r + m.dr);
    p.y_head_stride = m.r + m.dr;
    p.copy_tail = m.dr;
    p.n_rows = nt;
    return p;
  }
  // Step 3 (out = W_V_h o_lat) the same way: v_b's row (i, h), or kv_b's row
  // h (d_nope + d_v) + d_nope + i, holds W_V_h[i][.].
  cuda::SplitGemmArgs w_v_args(const float* olat, int64_t nt, const uint8_t* wv, float* out, int64_t out_cols) const {
    const cuda::MlaDims& m = s_.m;
    cuda::SplitGemmArgs p;
    p.x = olat;
    p.x_stride = int64_t(m.H) * m.r;
    p.x_head_stride = m.r;
    p.K = m.r;
    p.N = m.dv;
    p.row_bytes = s_.v_row;
    p.w = s_.split ? wv : wv + uint64_t(m.dn) * s_.v_row;
    p.mat_bytes = s_.split ? s_.v_mat : uint64_t(m.dn + m.dv) * s_.v_row;
    p.y = out;
    p.y_stride = out_cols;
    p.y_head_stride = m.dv;
    p.n_rows = nt;
    return p;
  }

  static int max_pos(const CallArgs& a, int64_t t0, int64_t nt) {
    int p = 0;
    for (int64_t t = t0; t < t0 + nt; ++t) p = std::max(p, a.step->pos[t]);
    return p;
  }

  // Are the step's latents rounded once for all its blocks? When they are
  // rounded to 8-bit blocks, the workspace holds them, the step's tokens are
  // one slot's (a decode, a prompt's chunk: several slots keep the rounding in
  // the split kernel's tiles), and either the preparation's launch takes the
  // rounding (prepare_one) or at least kRoundOnceMin blocks would round each
  // tile (tokens x head groups of the first chunk). Below that a launch of its
  // own costs what it saves (cuda_bench_test, H200, one token: V2-Lite's 4
  // head groups 24.8 -> 25.1 us at 512 positions, 29.7 -> 30.8 at 2048; V3's
  // 32 groups 55.4 -> 50.3 at 512, its 8 groups 155 -> 118 at 4096).
  bool lat_rounded(const CallArgs& a) const {
    if (s_.lat_offset == 0) return false;
    for (int64_t t = 1; t < a.step->n_tokens; ++t)
      if (a.step->slot[t] != a.step->slot[0]) return false;
    if (prepare_one(a)) return true;  // blocks in a launch there is anyway
    const int64_t nt = std::min(s_.chunk_tokens, a.in[0].rows);
    cuda::AttnArgs at = s_.attn;
    split(at, a, 0, nt);
    return nt * cuda::ceil_div(s_.m.H, at.gh) >= kRoundOnceMin;
  }

  // One decoding token with k_b: its rope, cache store and q_abs (and the
  // latents' rounding) take one launch, mla_prepare_one.
  bool prepare_one(const CallArgs& a) const { return s_.store && s_.split && a.in[0].rows == 1; }

  // Tokens [t0, t0 + nt)'s heads per block and split of the cache.
  void split(cuda::AttnArgs& at, const CallArgs& a, int64_t t0, int64_t nt) const {
    const int max_pos = CudaMla::max_pos(a, t0, nt);
    // Few tokens (decode): fewer heads a block, so blocks x splits of at least
    // two tiles still fill the GPU twice.
    const int sms = cuda::sm_count(s_.device);
    const int64_t tiles = std::max<int64_t>(1, (cuda::split_horizon(max_pos) + 1 + 31) / 32 / 2);
    // Measured (H200, V2-Lite at 576 and 2048 positions): 2 or 1 heads a block
    // are slower (33.8 / 38.5 us -> 37.7 / 52.5 and 53.4 / 83.8).
    while (at.gh > 4 && nt * cuda::ceil_div(s_.m.H, at.gh) * tiles < 2 * sms) at.gh /= 2;
    cuda::plan_splits(at, nt, max_pos, sms, s_.partial_floats);
  }

  Setup s_;
};

// The 8-bit rounding kv_b's products give the latents (ops_ref.h), as AttnArgs::round_lat.
int latent_rounding(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::BF16: return 2;
    case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q5_0: return 3;
    default: return 4;
  }
}

// store: cuda.mla_attention_store (inputs q and kv_a, the last weight kv_a's
// norm, the rope's params and eps).
std::unique_ptr<Kernel> make_mla(const CallSpec& s, std::string* error, bool store) {
  Binder b(s, error);
  if (!b.check(s.device >= 0, "a CUDA kernel needs a GPU device") ||
      !(store ? b.arity(2, 1, 2, 3) : b.arity(1, 1, 1, 2)) || !b.needs_kv())
    return nullptr;
  const size_t n_w = s.weights.size() - (store ? 1 : 0);  // the attention's: kv_b, or k_b and v_b
  cuda::MlaDims m;
  m.H = int(b.i("n_heads"));
  m.dn = int(b.i("d_nope"));
  m.dr = int(b.i("d_rope"));
  m.dv = int(b.i("d_v"));
  m.r = int(b.i("kv_lora_rank"));
  const double scale = b.f("kq_scale");
  if (!b.ok()) return nullptr;
  b.check(m.H > 0 && m.dn > 0 && m.dr > 0 && m.dv > 0 && m.r > 0, "bad MLA shape");
  b.check(s.kv->kind == KvView::Kind::MlaLatent && s.kv->k_cols == m.r && s.kv->v_cols == m.dr,
          "the KV cache is not a latent cache of ", m.r, " + ", m.dr);
  b.in_cols(0, int64_t(m.H) * (m.dn + m.dr));
  b.out_cols(0, int64_t(m.H) * m.dv);
  const bool split = n_w == 2;
  for (size_t k = 0; k < n_w; ++k)
    b.check(cuda::cuda_type(s.weights[k].type), "weight '", std::string(s.weights[k].name), "': type ",
            std::string(type_name(s.weights[k].type)), " has no CUDA kernels");
  if (!split) {
    b.weight_computable(0) && b.weight_shape(0, m.r, int64_t(m.H) * (m.dn + m.dv));
  } else {
    b.weight_computable(0) && b.weight_shape(0, m.dn, m.r, m.H);
    b.weight_computable(1) && b.weight_shape(1, m.r, m.dv, m.H);
  }
  const GgmlType latent_type = split ? s.weights[1].type : s.weights[0].type;
  const int round_lat = s.rounding == Rounding::GgmlCpu ? latent_rounding(latent_type) : 0;
  b.check(m.r % 4 == 0 && m.r <= 1024, "kv_lora_rank ", m.r, " must be a multiple of 4, at most 1024");
  b.check(round_lat != 3 || m.r % 32 == 0, "kv_lora_rank ", m.r, " does not fill blocks of 32");
  b.check(round_lat != 4 || m.r % 256 == 0, "kv_lora_rank ", m.r, " does not fill blocks of 256");
  b.check(s.in[0].max_rows <= 65535 * cuda::kTok, "too many tokens in a step");
  cpu::ref::RopeParams rope;
  double eps = 0;
  if (store && b.ok()) {
    eps = b.f("eps");
    rope = read_rope_params(b);
    if (!b.ok()) return nullptr;
    b.check(rope.n_dims == m.dr && b.i("offset", 0) == m.dn && b.i("head_dim") == m.dn + m.dr,
            "the rope (", rope.n_dims, " dims at ", b.i("offset", 0), " of ", b.i("head_dim"),
            ") is not q_pe's (", m.dr, " at ", m.dn, ")");
    bind_mla_store(b, s, 1, n_w, rope);
    b.check(m.dr <= cuda::kStoreThreads * 4 && s.in[1].max_rows >= s.in[0].max_rows, "bad kv_a rows");
  }
  if (!b.ok()) return nullptr;

  CudaMla::Setup st;
  st.device = s.device;
  st.m = m;
  st.split = split;
  st.k_type = s.weights[0].type;
  st.v_type = s.weights[split ? 1 : 0].type;
  st.k_row = s.weights[0].nb[1];
  st.k_mat = s.weights[0].nb[2];
  st.v_row = s.weights[split ? 1 : 0].nb[1];
  st.v_mat = s.weights[split ? 1 : 0].nb[2];
  cuda::AttnArgs& a = st.attn;
  a.q_stride = int64_t(m.H) * (m.r + m.dr);
  a.q_head_stride = m.r + m.dr;
  a.dk = m.r + m.dr;
  a.dv = m.r;
  a.n_heads = m.H;
  a.group = m.H;
  a.gh = cuda::attention_heads_per_block(m.r, m.H, false);
  a.scale = float(scale);
  a.k_cols = m.r;
  a.v_cols = m.dr;
  a.n_ctx = s.kv->n_ctx;
  const uint64_t es = s.kv->elem_bytes();
  a.vec = (uint64_t(m.r) * es) % 16 == 0 && (uint64_t(m.dr) * es) % 16 == 0;
  a.round_lat = round_lat;
  a.out_stride = int64_t(m.H) * m.r;
  a.out_head_stride = m.r;
  const size_t smem = cuda::attention_smem(a, true);
  int max_smem = 0;
  cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, s.device);
  if (!b.check(smem <= size_t(max_smem), "MLA attention needs ", smem, " bytes of shared memory, the GPU has ",
               max_smem))
    return nullptr;
  const uint64_t per_token = uint64_t(m.H) * (2 * m.r + m.dr) * 4;
  st.chunk_tokens = std::max<int64_t>(1, std::min<int64_t>(s.in[0].max_rows, int64_t(kMlaChunkBytes / per_token)));
  st.partial_floats = cuda::partial_floats_bound(m.H, a.gh, m.r, cuda::sm_count(s.device));
  uint64_t bytes = uint64_t(st.chunk_tokens) * per_token + st.partial_floats * 4;
  if (store) {
    st.store = true;
    st.eps = float(eps);
    st.rope = cuda::rope_args(rope);
    bytes += uint64_t(s.in[0].max_rows) * uint64_t(m.H) * (m.dn + m.dr) * 4;  // q roped, steps of several tokens
  }
  // A slot's latents rounded once a step (8-bit blocks: n_ctx rows of r
  // values, 16-byte aligned, then of r / 32 scales), where that takes at most
  // kLatScratchBytes of GPU memory. F16 and BF16 roundings are a conversion a
  // value: their tiles keep rounding in place.
  const uint64_t lat_bytes = uint64_t(s.kv->n_ctx) * (uint64_t(m.r) / 32 * 4 + uint64_t(m.r));
  if ((round_lat == 3 || round_lat == 4) && lat_bytes <= kLatScratchBytes) {
    st.lat_offset = (bytes / 4 + 3) / 4 * 4;
    bytes = st.lat_offset * 4 + lat_bytes;
  }
  if (!cuda::reserve_workspace(s.device, bytes, error)) return nullptr;
  return std::make_unique<CudaMla>(st);
}

}  // namespace

std::unique_ptr<Kernel> make_cuda_mla_attention(const CallSpec& s, std::string* error) {
  return make_mla(s, error, false);
}

std::unique_ptr<Kernel> make_cuda_mla_attention_absorbed(const CallSpec& s, std::string* error) {
  return make_mla(s, error, false);
}

std::unique_ptr<Kernel> make_cuda_mla_attention_store(const CallSpec& s, std::string* error) {
  return make_mla(s, error, true);
}

}  // namespace kt::kern
