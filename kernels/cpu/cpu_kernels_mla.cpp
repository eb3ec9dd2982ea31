// DeepSeek's multi-head latent attention on the CPU (reference path). The
// cache holds, per token, the normed latent c (kv_lora_rank values) and the
// roped shared key k_pe (d_rope values): KvView::Kind::MlaLatent.
//
// cpu.mla_cache_store — in[0] kv_a [tokens][kv_lora_rank + d_rope] (the
//   output of kv_a_proj_with_mqa); weights[0] kv_a_norm [kv_lora_rank].
//   Writes rms_norm(c) and rope(k_pe) at each token's (slot, position).
//   params: eps and the rope parameters (rope_params.h; n_dims = d_rope).
// cpu.mla_attention / cpu.mla_attention_absorbed — out[0] [tokens][n_heads *
//   d_v] from in[0] q [tokens][n_heads * (d_nope + d_rope)] (rope part roped)
//   over the cache. Weights: kv_b [kv_lora_rank, n_heads * (d_nope + d_v)],
//   or its halves as newer GGUF files store them, k_b [d_nope, kv_lora_rank,
//   n_heads] and v_b [kv_lora_rank, d_v, n_heads]. The first decompresses K and
//   V for every cached token (as HF's modeling code); the second folds kv_b's
//   K half into the query and its V half into the output (DeepSeek-V2 paper
//   2.1.2), attending over the latents. Equal up to rounding (ops_ref.h).
//   params: n_heads, d_nope, d_rope, d_v, kv_lora_rank, kq_scale.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/matmul_q.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/cpu/rope_params.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/cpu/work_split.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

namespace ref = cpu::ref;

namespace {

class MlaCacheStore final : public Kernel {
 public:
  MlaCacheStore(float eps, ref::RopeParams rope) : eps_(eps), rope_(rope) {}

  void run(const CallArgs& a) override {
    const KvView& kv = *a.kv;
    const Act& x = a.in[0];
    const float* norm = a.weights[0].f32();
    const int64_t r = kv.k_cols, dr = kv.v_cols;
    a.par->for_range(x.rows, [&](int64_t b, int64_t e, int) {
      std::vector<float> lat(static_cast<size_t>(r)), pe(static_cast<size_t>(dr));
      for (int64_t t = b; t < e; ++t) {
        const float* row = x.row(t);
        ref::rms_norm(row, norm, r, 1, eps_, lat.data());
        std::copy(row + r, row + r + dr, pe.begin());
        ref::rope(pe.data(), 1, dr, 1, dr, &a.step->pos[t], rope_);
        store_row(kv.type, lat.data(), r, kv.k_row(a.step->slot[t], a.step->pos[t]));
        store_row(kv.type, pe.data(), dr, kv.v_row(a.step->slot[t], a.step->pos[t]));
      }
    });
  }

 private:
  float eps_;
  ref::RopeParams rope_;
};

class MlaAttention final : public Kernel {
 public:
  // w: kv_b decoded to floats, [n_heads * (d_nope + d_v)][kv_lora_rank];
  // latent_type: the type whose products the latents are rounded for.
  MlaAttention(bool absorbed, ref::MlaShape shape, float kq_scale, std::vector<float> w, GgmlType latent_type,
               ref::ActRounding rounding)
      : absorbed_(absorbed), s_(shape), kq_scale_(kq_scale), w_(std::move(w)), latent_type_(latent_type),
        rounding_(rounding) {}

  void run(const CallArgs& a) override {
    const std::vector<Run> runs = step_runs(*a.step);
    const Act &q = a.in[0], &y = a.out[0];
    a.par->for_range(int64_t(runs.size()), [&](int64_t b, int64_t e, int) {
      std::vector<float> lat, pe, k, v;
      for (int64_t i = b; i < e; ++i) {
        const Run& r = runs[size_t(i)];
        const int64_t n_kv = r.pos0 + r.n;
        load_cache(*a.kv, r.slot, n_kv, lat, pe);
        // The latents as kv_b's products see them (its GGUF type's rounding).
        for (int64_t j = 0; j < n_kv; ++j)
          ref::round_activations(latent_type_, rounding_, &lat[size_t(j * s_.kv_lora_rank)], s_.kv_lora_rank,
                                 &lat[size_t(j * s_.kv_lora_rank)]);
        if (absorbed_) {
          ref::mla_attention_absorbed(GgmlType::F32, w_.data(), s_, q.row(r.first), lat.data(), pe.data(), r.n,
                                      r.pos0, kq_scale_, y.row(r.first), rounding_);
        } else {
          const int64_t dk = s_.d_nope + s_.d_rope;
          k.resize(size_t(n_kv * s_.n_heads * dk));
          v.resize(size_t(n_kv * s_.n_heads * s_.d_v));
          ref::mla_decompress_kv(GgmlType::F32, w_.data(), s_, lat.data(), pe.data(), n_kv, k.data(), v.data(),
                                 ref::ActRounding::Exact);
          ref::attention(q.row(r.first), k.data(), v.data(), r.n, r.pos0, s_.n_heads, s_.n_heads, dk, s_.d_v,
                         kq_scale_, y.row(r.first), rounding_);
        }
      }
    });
  }

 private:
  bool absorbed_;
  ref::MlaShape s_;
  float kq_scale_;
  std::vector<float> w_;
  GgmlType latent_type_;
  ref::ActRounding rounding_;
};

// A weight's rows as floats, nr consecutive rows of one matrix at a time: F32
// rows as they are; rows of a type vec::dequant decodes fast, decoded into the
// caller's tile on each use; rows of any other type (or with no AVX-512), from
// a float copy decoded once here (what the weights cost in floats, but no
// reference decoder in the hot loop).
class WeightRows {
 public:
  explicit WeightRows(const WeightView& w) : type_(w.type), n_in_(w.ne[0]), rows_(w.ne[1]) {
    if (type_ == GgmlType::F32 || vec::dequant_fast(type_)) return;
    const TypeTraits& t = type_traits(type_);
    copy_.resize(size_t(n_in_ * rows_ * w.ne[2]));
    for (int64_t e = 0; e < w.ne[2]; ++e)
      for (int64_t r = 0; r < rows_; ++r) t.dequant_row(w.row(r, e), &copy_[size_t((e * rows_ + r) * n_in_)], n_in_);
  }
  // Rows r0 .. r0 + nr of matrix e of w (the view this was made from, as bound
  // for the call), n_in floats each, consecutive.
  const float* get(const WeightView& w, int64_t r0, int64_t e, int64_t nr, float* tile) const {
    if (type_ == GgmlType::F32) return reinterpret_cast<const float*>(w.row(r0, e));
    if (!copy_.empty()) return &copy_[size_t((e * rows_ + r0) * n_in_)];
    for (int64_t i = 0; i < nr; ++i) vec::dequant(type_, w.row(r0 + i, e), tile + i * n_in_, n_in_);
    return tile;
  }

 private:
  GgmlType type_;
  int64_t n_in_, rows_;
  std::vector<float> copy_;
};

// The absorbed form, fast, flash-decoding style: float sums straight over the
// cache's rows (F16/BF16 converted a block of rows at a time), each group of
// 16 heads in the lanes of a vector (vec::attend_lanes: a cached row meets
// every head of the group in one multiply-add, no horizontal sums), and each
// token's positions split into chunks so one decoding token uses every thread.
//  1. q_abs = W_UK^T q_nope per (token, head), written with q_pe into the
//     lanes: qt[t][group][c][lane].
//  2. Per (token, chunk of positions): online softmax over blocks of rows:
//     scores q_abs . c_j + q_pe . k_pe_j, the running max, sum and attended
//     latent o = sum_j p_j c_j, per group of heads in lanes.
//  3. Per (token, group, columns): the chunks merged (rescaled to one max)
//     and divided by the sum, written one head a row (vec::merge_lanes).
//  4. W_UV o per (token, head).
// It computes the reference's exact (Rounding::Exact) numbers up to float
// summation: the latents are used as the cache holds them (the reference's
// GgmlCpu rounding of latents to kv_b's 8-bit blocks mirrors llama.cpp's
// non-absorbed graph and is not part of this form's math).
//
// The weights stay as the file stores them (a decoding token reads 1.3 MB of
// V2-Lite's Q5_0 k_b + Q4_K v_b a layer instead of 8 MB of floats): steps 1
// and 4 decode kRows weight rows at a time (vec::dequant, the reference
// decoder's floats) and use them for a block of up to kTokens tokens, so a
// prompt decodes each row once per block, not once per token. A decoding step
// (kDecodeTokens or fewer) splits the weight rows into items instead (V2-Lite:
// 36 for q_abs, 64 for W_V, not 16 heads): one item a thread left each pass
// waiting on its slowest core. Types without a
// vector decoder on this CPU (all of them without AVX-512) are decoded to
// floats once at bind instead (WeightRows).
class MlaAbsorbedFast final : public Kernel {
 public:
  MlaAbsorbedFast(ref::MlaShape shape, float kq_scale, const std::vector<WeightView>& w)
      : s_(shape), kq_scale_(kq_scale), rows_k_(w[0]) {
    if (w.size() == 2) rows_v_.emplace(w[1]);
  }
  std::string_view impl() const override { return "vector"; }

  void run(const CallArgs& a) override {
    const std::vector<Run> runs = step_runs(*a.step);
    const Act &q = a.in[0], &y = a.out[0];
    const KvView& kv = *a.kv;
    const int64_t H = s_.n_heads, dn = s_.d_nope, dr = s_.d_rope, dv = s_.d_v, r = s_.kv_lora_rank;
    const int64_t n = a.step->n_tokens;
    const int threads = a.par->n_threads();
    const bool split = a.weights.size() == 2;
    const WeightView& w_k = a.weights[0];  // kv_b, or k_b
    const WeightView& w_v = a.weights[split ? 1 : 0];
    std::vector<int32_t> slot_of(static_cast<size_t>(n));
    for (const Run& rn : runs)
      for (int64_t t = rn.first; t < rn.first + rn.n; ++t) slot_of[size_t(t)] = rn.slot;
    int64_t work = 0;
    for (int64_t t = 0; t < n; ++t) work += (a.step->pos[t] + 1) * H * (r + dr);
    const bool par = worth_threads(work + n * H * r * (dn + dv));
    const int64_t n_blocks = (n + kTokens - 1) / kTokens;
    const int64_t G = (H + vec::kLanes - 1) / vec::kLanes, dq = r + dr;  // groups of heads; a query's values
    // A decoding step's items take all its tokens and part of the weight rows
    // (step 1: a group's heads for kRows query values; step 4: a head's rows
    // in kRowParts); a prompt's take a block of kTokens tokens and a head.
    const bool decode = n <= kDecodeTokens;
    const int64_t parts_v = decode ? kRowParts : 1;

    // 1. The queries in lanes [n][G][dq][16]: q_abs, then q_pe; lanes past H
    // zero. Items write whole cache lines of it (a line is one query value of
    // the 16 heads of a group): items of one head writing their lane of lines
    // the other heads' items also wrote made every line travel between all the
    // cores. A decoding step with k_b takes (group, kRows values) items, each
    // head of the group's k_b rows for those values; otherwise q_abs is made
    // one head a row (items of a head and a block of tokens, kv_b's sums over
    // d_nope rows of r values) and laid into lanes by a pass of its own.
    auto* qt = static_cast<float*>(scratch(5, size_t(n * G * dq * vec::kLanes) * sizeof(float)));
    // Query value c of head h (lane h % 16) for token t; q_abs(c) gives c < r.
    auto lane_value = [&](int64_t t, int64_t h, int64_t c, auto q_abs) {
      return h >= H ? 0.0f : c < r ? q_abs(c) : q.row(t)[h * (dn + dr) + dn + (c - r)];
    };
    // Rows c0 .. c0 + nr of W_K_h (k_b) times token rows t0 .. t0 + nt of q_nope: out [nt][ldo].
    auto k_b_rows = [&](int64_t h, int64_t c0, int64_t nr, int64_t t0, int64_t nt, float* out, int64_t ldo) {
      auto* tile = static_cast<float*>(scratch(7, size_t(kRows * std::max(dn, r)) * sizeof(float)));
      vec::gemm_nt(q.row(t0) + h * (dn + dr), q.cols, rows_k_.get(w_k, c0, h, nr, tile), dn, out, ldo, nt, nr, dn,
                   false);
    };
    if (decode && split) {
      const int64_t q_rows = (dq + kRows - 1) / kRows;
      for_each_item(*a.par, G * q_rows, par, [&](int64_t item, int) {
        const int64_t g = item / q_rows, c0 = item % q_rows * kRows, c1 = std::min(dq, c0 + kRows);
        const int64_t nk = std::max<int64_t>(0, std::min(c1, r) - c0);  // of them q_abs's (the rest q_pe)
        float qa[kDecodeTokens * kRows];                                 // [n][kRows], from c0
        for (int64_t h = g * vec::kLanes; h < std::min(H, (g + 1) * vec::kLanes) && nk > 0; ++h)
          prefetch_l2(w_k.row(c0, h), nk * w_k.row_bytes());
        for (int64_t lane = 0; lane < vec::kLanes; ++lane) {
          const int64_t h = g * vec::kLanes + lane;
          if (h < H && nk > 0) k_b_rows(h, c0, nk, 0, n, qa, kRows);
          for (int64_t t = 0; t < n; ++t) {
            float* qg = qt + (t * G + g) * dq * vec::kLanes + lane;
            for (int64_t c = c0; c < c1; ++c)
              qg[c * vec::kLanes] = lane_value(t, h, c, [&](int64_t cc) { return qa[t * kRows + cc - c0]; });
          }
        }
      });
    } else {
      auto* q_abs = static_cast<float*>(scratch(4, size_t(n * H * r) * sizeof(float)));
      for_each_item(*a.par, n_blocks * H, par, [&](int64_t item, int) {
        const int64_t h = item % H, t0 = item / H * kTokens, nt = std::min(n, t0 + kTokens) - t0;
        float* qa = q_abs + (t0 * H + h) * r;
        if (split) {
          // k_b head h: r rows of d_nope values, row c = column c of W_K_h.
          for (int64_t c = 0; c < r; c += kRows) k_b_rows(h, c, std::min(kRows, r - c), t0, nt, qa + c, H * r);
        } else {
          // kv_b rows h * (d_nope + d_v) + j: row j of W_K_h, r values.
          auto* tile = static_cast<float*>(scratch(7, size_t(kRows * std::max(dn, r)) * sizeof(float)));
          for (int64_t t = 0; t < nt; ++t) std::fill(qa + t * H * r, qa + t * H * r + r, 0.0f);
          for (int64_t j0 = 0; j0 < dn; j0 += kRows) {
            const int64_t nr = std::min(kRows, dn - j0);
            const float* wr = rows_k_.get(w_k, h * (dn + dv) + j0, 0, nr, tile);
            vec::gemm_nn(q.row(t0) + h * (dn + dr) + j0, q.cols, wr, r, qa, H * r, nt, r, nr, nullptr);
          }
        }
      });
      const int64_t q_cols = (dq + kLanesRows - 1) / kLanesRows;  // items of kLanesRows query values
      for_each_item(*a.par, n * G * q_cols, par, [&](int64_t item, int) {
        const int64_t c0 = item % q_cols * kLanesRows, c1 = std::min(dq, c0 + kLanesRows);
        const int64_t g = item / q_cols % G, t = item / q_cols / G;
        float* qg = qt + (t * G + g) * dq * vec::kLanes;
        for (int64_t lane = 0; lane < vec::kLanes; ++lane) {
          const int64_t h = g * vec::kLanes + lane;
          for (int64_t c = c0; c < c1; ++c)
            qg[c * vec::kLanes + lane] = lane_value(t, h, c, [&](int64_t cc) { return q_abs[(t * H + h) * r + cc]; });
        }
      });
    }

    // 2. Chunks of whole blocks of kBlock rows (a block's cost is mostly the
    // same whatever its rows: every head's attended latent is rescaled per
    // block), enough for twice the threads when few tokens decode, and at
    // least kChunkBlocks blocks each: every chunk's partial (32 KB a group)
    // is read back by the merge from the core that wrote it.
    const int64_t per_token = std::max<int64_t>(1, (2 * threads + n - 1) / n);
    chunk_first_.assign(size_t(n) + 1, 0);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t n_blk = (a.step->pos[t] + kBlock) / kBlock;
      const int64_t k_n = std::clamp<int64_t>(n_blk / kChunkBlocks, 1, per_token);
      chunk_first_[size_t(t) + 1] = chunk_first_[size_t(t)] + k_n;
    }
    const int64_t n_chunks = chunk_first_[size_t(n)];
    // Per chunk and group: max [16], sum [16], attended latents [r][16].
    const int64_t group_part = 2 * vec::kLanes + r * vec::kLanes, part = G * group_part;
    auto* parts = static_cast<float*>(scratch(6, size_t(n_chunks * part) * sizeof(float)));
    for_each_item(*a.par, n_chunks, par, [&](int64_t c, int) {
      const int64_t t = std::upper_bound(chunk_first_.begin(), chunk_first_.end(), c) - chunk_first_.begin() - 1;
      const int64_t k = c - chunk_first_[size_t(t)], k_n = chunk_first_[size_t(t) + 1] - chunk_first_[size_t(t)];
      const int64_t n_seen = a.step->pos[t] + 1, n_blk = (n_seen + kBlock - 1) / kBlock;
      const int64_t j0 = kBlock * (n_blk * k / k_n), j1 = std::min(n_seen, kBlock * (n_blk * (k + 1) / k_n));
      float* P = parts + c * part;
      for (int64_t g = 0; g < G; ++g) {
        float* Pg = P + g * group_part;
        std::fill(Pg, Pg + vec::kLanes, -INFINITY);
        std::fill(Pg + vec::kLanes, Pg + group_part, 0.0f);
      }
      auto* rows = static_cast<float*>(scratch(7, size_t(kBlock * dq) * sizeof(float)));
      prefetch_l2(kv.k_row(slot_of[size_t(t)], j0), uint64_t((j1 - j0) * r) * kv.elem_bytes());
      prefetch_l2(kv.v_row(slot_of[size_t(t)], j0), uint64_t((j1 - j0) * dr) * kv.elem_bytes());
      for (int64_t b0 = j0; b0 < j1; b0 += kBlock) {
        const int64_t nb = std::min(kBlock, j1 - b0);
        for (int64_t j = 0; j < nb; ++j) {
          vec::to_f32(kv.type, kv.k_row(slot_of[size_t(t)], b0 + j), rows + j * dq, r);
          vec::to_f32(kv.type, kv.v_row(slot_of[size_t(t)], b0 + j), rows + j * dq + r, dr);
        }
        for (int64_t g = 0; g < G; ++g) {
          float* Pg = P + g * group_part;
          vec::attend_lanes(qt + (t * G + g) * dq * vec::kLanes, dq, rows, dq, nb, r, kq_scale_, Pg,
                            Pg + vec::kLanes, Pg + 2 * vec::kLanes);
        }
      }
    });

    // 3. Per (token, group, columns): the token's chunks rescaled to one max
    // and divided by their sum, o [n][H][r].
    const int64_t col_parts = std::clamp<int64_t>((2 * threads + n * G - 1) / (n * G), 1, r / vec::kLanes);
    const int64_t cols = (r / vec::kLanes + col_parts - 1) / col_parts * vec::kLanes;
    auto* o = static_cast<float*>(scratch(4, size_t(n * H * r) * sizeof(float)));  // [n][H][r] (q_abs is spent)
    for_each_item(*a.par, n * G * col_parts, par, [&](int64_t item, int) {
      const int64_t cp = item % col_parts, g = item / col_parts % G, t = item / col_parts / G;
      const int64_t c0 = std::min(r, cp * cols), c1 = std::min(r, c0 + cols);
      if (c0 >= c1) return;
      const int64_t k0 = chunk_first_[size_t(t)], nk = chunk_first_[size_t(t) + 1] - k0;
      const float* P0 = parts + k0 * part + g * group_part;
      for (int64_t k = 0; k < nk; ++k) {
        prefetch_l2(P0 + k * part, 2 * vec::kLanes * sizeof(float));
        prefetch_l2(P0 + k * part + (2 + c0) * vec::kLanes, uint64_t(c1 - c0) * vec::kLanes * sizeof(float));
      }
      auto* f = static_cast<float*>(scratch(8, size_t(nk * vec::kLanes) * sizeof(float)));  // [nk][16]
      float M[vec::kLanes], L[vec::kLanes] = {};
      std::fill(M, M + vec::kLanes, -INFINITY);
      for (int64_t k = 0; k < nk; ++k)
        for (int64_t h = 0; h < vec::kLanes; ++h) M[h] = std::max(M[h], P0[k * part + h]);
      for (int64_t k = 0; k < nk; ++k)
        for (int64_t h = 0; h < vec::kLanes; ++h) f[k * vec::kLanes + h] = P0[k * part + h] - M[h];
      vec::exp_shift(f, nk * vec::kLanes, 0.0f);  // exp(m_k - M); an empty chunk (m -inf, sum 0) adds nothing
      for (int64_t k = 0; k < nk; ++k)
        for (int64_t h = 0; h < vec::kLanes; ++h) L[h] += f[k * vec::kLanes + h] * P0[k * part + vec::kLanes + h];
      for (int64_t k = 0; k < nk; ++k)
        for (int64_t h = 0; h < vec::kLanes; ++h) f[k * vec::kLanes + h] /= L[h] > 0 ? L[h] : 1.0f;
      const int64_t h0 = g * vec::kLanes;
      vec::merge_lanes(P0 + 2 * vec::kLanes + c0 * vec::kLanes, part, nk, f, c1 - c0, o + (t * H + h0) * r + c0, r,
                       std::min(vec::kLanes, H - h0));
    });

    // 4. W_UV o per (head, rows part) or (head, block of tokens).
    const int64_t items_v = decode ? H * parts_v : n_blocks * H;
    for_each_item(*a.par, items_v, par, [&](int64_t item, int) {
      const int64_t h = item % H, t0 = decode ? 0 : item / H * kTokens, t1 = decode ? n : std::min(n, t0 + kTokens);
      const int64_t per = (dv / kRows + parts_v - 1) / parts_v * kRows;
      const int64_t part_v = decode ? item / H : 0;
      const int64_t i_begin = std::min(dv, part_v * per), i_end = std::min(dv, i_begin + per);
      auto* tile = static_cast<float*>(scratch(7, size_t(kRows * r) * sizeof(float)));
      // W_V_h rows: v_b head h, or kv_b rows h * (d_nope + d_v) + d_nope + i.
      float* out = y.row(t0) + h * dv;
      prefetch_l2(split ? w_v.row(i_begin, h) : w_v.row(h * (dn + dv) + dn + i_begin),
                  uint64_t(i_end - i_begin) * w_v.row_bytes());
      for (int64_t i0 = i_begin; i0 < i_end; i0 += kRows) {
        const int64_t nr = std::min(kRows, i_end - i0);
        const float* wr = split ? rows_v_->get(w_v, i0, h, nr, tile) : rows_k_.get(w_v, h * (dn + dv) + dn + i0, 0, nr, tile);
        vec::gemm_nt(o + (t0 * H + h) * r, H * r, wr, r, out + i0, y.cols, t1 - t0, nr, r, false);
      }
    });
  }

 private:
  static constexpr int64_t kTokens = 16;       // tokens per weight row decoded
  static constexpr int64_t kRows = 16;         // weight rows decoded at a time
  static constexpr int64_t kDecodeTokens = 4;  // steps this small split heads' rows, not tokens
  static constexpr int64_t kRowParts = 4;      // items per head of such a step
  static constexpr int64_t kLanesRows = 64;    // query values a transposing item takes
  // Cached rows a step of the attention takes: they stay in L1 while every
  // head's scores and attended latents are taken against them.
  static constexpr int64_t kBlock = 16;
  static constexpr int64_t kChunkBlocks = 2;  // blocks a chunk takes at least (a token with fewer: one chunk)
  static_assert(kBlock <= vec::kLanes, "vec::attend_lanes takes at most kLanes rows");
  ref::MlaShape s_;
  float kq_scale_;
  WeightRows rows_k_;                 // kv_b, or k_b
  std::optional<WeightRows> rows_v_;  // v_b
  std::vector<int64_t> chunk_first_;  // per token, its first chunk (and the end)
};

// cpu.mla_attention's fast path where the file has kv_b: the decompressed form
// as llama.cpp's CPU graph computes it (ops_ref.h attention with GgmlCpu
// rounding), for prefill. Per run of a sequence's tokens:
//  1. K_nope and V of every cached token: kv_b's product over the latents
//     (matmul_q: the latents rounded as ggml rounds them, AMX tiles from 16
//     rows), with the shared rope key appended to each head's K; K, V and the
//     queries rounded to F16 (llama.cpp's F16 cache).
//  2. Per (head, block of 16 tokens): scores over the positions the block
//     sees (a float GEMM), each token's softmax over its own positions,
//     normalized and rounded to F16 as the reference rounds it, then P V.
// Against the absorbed form it multiplies 3.4x fewer values in the attention
// (d_nope + d_rope + d_v = 320 a head and position, not 2 kv_lora_rank +
// d_rope = 1088) and adds one matrix product per cached token and step, which
// the AMX tiles take: the long prompt's order. A step with a run of fewer than
// kMinRun tokens (decode, a short turn after a long history) takes the absorbed
// kernel instead: decompressing every cached token costs ~4 MFLOP of int8
// products each (V2-Lite), which pays when enough queries share it.
class MlaDecompressedFast final : public Kernel {
 public:
  MlaDecompressedFast(ref::MlaShape shape, float kq_scale, const std::vector<WeightView>& w)
      : s_(shape), kq_scale_(kq_scale), absorbed_(shape, kq_scale, w),
        impl_(std::string("decompressed, kv_b ") + cpu::matmul_q_impl(w[0].type)) {}
  std::string_view impl() const override { return impl_; }

  void run(const CallArgs& a) override {
    const std::vector<Run> runs = step_runs(*a.step);
    for (const Run& rn : runs)
      if (rn.n < kMinRun) return absorbed_.run(a);
    const Act &q = a.in[0], &y = a.out[0];
    const WeightView& kv_b = a.weights[0];
    const KvView& kv = *a.kv;
    const int64_t H = s_.n_heads, dn = s_.d_nope, dr = s_.d_rope, dv = s_.d_v, r = s_.kv_lora_rank;
    const int64_t dk = dn + dr, per_head = dn + dv, n_rows = H * per_head;
    for (const Run& rn : runs) {
      const int64_t n_kv = rn.pos0 + rn.n;
      const bool par = worth_threads(n_kv * r * n_rows);
      // 1. The cached latents (as ggml's 8-bit blocks for kv_b) and rope keys.
      const size_t arb = cpu::act_row_bytes(kv_b.type, r);
      auto* xq = static_cast<uint8_t*>(scratch(0, size_t(n_kv) * arb));
      auto* pe = static_cast<float*>(scratch(1, size_t(n_kv * dr) * sizeof(float)));
      for_each_item(*a.par, n_kv, par, [&](int64_t j, int) {
        auto* lat = static_cast<float*>(scratch(8, size_t(r) * sizeof(float)));
        vec::to_f32(kv.type, kv.k_row(rn.slot, j), lat, r);
        cpu::quantize_acts(kv_b.type, lat, r, 1, r, xq + size_t(j) * arb);
        vec::to_f32(kv.type, kv.v_row(rn.slot, j), pe + j * dr, dr);
      });
      //    K_nope | V of every cached token and head: [n_kv][H][d_nope + d_v].
      auto* kvd = static_cast<float*>(scratch(2, size_t(n_kv * n_rows) * sizeof(float)));
      const size_t tb = cpu::tiled_acts_bytes(kv_b.type, r, n_kv);
      auto* tiles = tb ? static_cast<uint8_t*>(scratch(3, tb)) : nullptr;
      if (tiles) cpu::tile_acts(kv_b.type, xq, r, n_kv, tiles);
      const int64_t block = 64;
      for_each_item(*a.par, (n_rows + block - 1) / block, par, [&](int64_t i, int) {
        const int64_t o0 = i * block, o1 = std::min(n_rows, o0 + block);
        if (tiles)
          cpu::matmul_q_tiled(kv_b.type, kv_b.data, kv_b.row_bytes(), r, tiles, n_kv, kvd, n_rows, o0, o1);
        else
          cpu::matmul_q(kv_b.type, kv_b.data, kv_b.row_bytes(), r, xq, n_kv, kvd, n_rows, o0, o1);
      });
      //    K = [K_nope, k_pe] [H][n_kv][dk] and V [H][n_kv][dv], rounded to F16:
      //    head-major, so a block of queries streams one head's keys in order.
      auto* K = static_cast<float*>(scratch(4, size_t(n_kv * H * dk) * sizeof(float)));
      auto* V = static_cast<float*>(scratch(5, size_t(n_kv * H * dv) * sizeof(float)));
      for_each_item(*a.par, n_kv, par, [&](int64_t j, int) {
        for (int64_t h = 0; h < H; ++h) {
          const float* src = kvd + (j * H + h) * per_head;
          float* kh = K + (h * n_kv + j) * dk;
          vec::round_f16(src, kh, dn);
          vec::round_f16(pe + j * dr, kh + dn, dr);
          vec::round_f16(src + dn, V + (h * n_kv + j) * dv, dv);
        }
      });
      // 2. Attention per (head, block of kTokens tokens).
      const int64_t n_blocks = (rn.n + kTokens - 1) / kTokens;
      for_each_item(*a.par, n_blocks * H, par, [&](int64_t item, int) {
        const int64_t h = item % H, t0 = item / H * kTokens, nt = std::min(kTokens, rn.n - t0);
        const int64_t seen = rn.pos0 + t0 + nt;  // positions the block's last token sees
        auto* Qb = static_cast<float*>(scratch(8, size_t(kTokens * (dk + seen)) * sizeof(float)));
        float* S = Qb + kTokens * dk;  // [nt][seen]
        for (int64_t t = 0; t < nt; ++t) vec::round_f16(q.row(rn.first + t0 + t) + h * dk, Qb + t * dk, dk);
        vec::gemm_nt(Qb, dk, K + h * n_kv * dk, dk, S, seen, nt, seen, dk, false);
        for (int64_t t = 0; t < nt; ++t) {
          float* st = S + t * seen;
          const int64_t n_seen = rn.pos0 + t0 + t + 1;  // causal: up to and including itself
          float m = -INFINITY;
          for (int64_t j = 0; j < n_seen; ++j) m = std::max(m, st[j] *= kq_scale_);
          const double inv = 1.0 / double(vec::exp_shift(st, n_seen, m));
          for (int64_t j = 0; j < n_seen; ++j) st[j] = float(double(st[j]) * inv);
          vec::round_f16(st, st, n_seen);  // ggml rounds the probabilities for P V
          std::fill(st + n_seen, st + seen, 0.0f);
        }
        float* out = y.row(rn.first + t0) + h * dv;
        for (int64_t t = 0; t < nt; ++t) std::fill(out + t * y.cols, out + t * y.cols + dv, 0.0f);
        vec::gemm_nn(S, seen, V + h * n_kv * dv, dv, out, y.cols, nt, dv, seen, nullptr);
      });
    }
  }

 private:
  // Queries a block of scores takes: each block streams its head's K and V
  // once (at 16, a 2048-token prompt's attention ran at half the speed of 512's).
  static constexpr int64_t kTokens = 64;
  static constexpr int64_t kMinRun = 32;  // fewer queries in a run: the absorbed kernel
  ref::MlaShape s_;
  float kq_scale_;
  MlaAbsorbedFast absorbed_;
  std::string impl_;
};

// kv_b, or k_b + v_b, as one float matrix in kv_b's layout.
std::vector<float> decode_kv_b(const CallSpec& s, const ref::MlaShape& m) {
  const int64_t r = m.kv_lora_rank, per_head = m.d_nope + m.d_v;
  std::vector<float> w(size_t(m.n_heads * per_head * r));
  if (s.weights.size() == 1) {
    const WeightView& kv_b = s.weights[0];
    const TypeTraits& t = type_traits(kv_b.type);
    for (int64_t row = 0; row < m.n_heads * per_head; ++row) t.dequant_row(kv_b.row(row), &w[size_t(row * r)], r);
    return w;
  }
  const WeightView &k_b = s.weights[0], &v_b = s.weights[1];
  const TypeTraits &tk = type_traits(k_b.type), &tv = type_traits(v_b.type);
  std::vector<float> row(size_t(std::max(m.d_nope, r)));
  for (int64_t h = 0; h < m.n_heads; ++h) {
    float* wh = &w[size_t(h * per_head * r)];
    // k_b head h: r rows of d_nope values, row c = column c of W_K_h.
    for (int64_t c = 0; c < r; ++c) {
      tk.dequant_row(k_b.row(c, h), row.data(), m.d_nope);
      for (int64_t j = 0; j < m.d_nope; ++j) wh[j * r + c] = row[size_t(j)];
    }
    // v_b head h: d_v rows of r values, W_V_h as is.
    for (int64_t i = 0; i < m.d_v; ++i) tv.dequant_row(v_b.row(i, h), wh + (m.d_nope + i) * r, r);
  }
  return w;
}

std::unique_ptr<Kernel> make_mla(const CallSpec& s, std::string* error, bool absorbed) {
  Binder b(s, error);
  if (!b.arity(1, 1, 1, 2) || !b.needs_kv()) return nullptr;
  ref::MlaShape m;
  m.n_heads = b.i("n_heads");
  m.d_nope = b.i("d_nope");
  m.d_rope = b.i("d_rope");
  m.d_v = b.i("d_v");
  m.kv_lora_rank = b.i("kv_lora_rank");
  const double scale = b.f("kq_scale");
  if (!b.ok()) return nullptr;
  b.check(m.n_heads > 0 && m.d_nope > 0 && m.d_rope > 0 && m.d_v > 0 && m.kv_lora_rank > 0, "bad MLA shape");
  b.check(s.kv->kind == KvView::Kind::MlaLatent && s.kv->k_cols == m.kv_lora_rank && s.kv->v_cols == m.d_rope,
          "the KV cache is not a latent cache of ", m.kv_lora_rank, " + ", m.d_rope);
  b.in_cols(0, m.n_heads * (m.d_nope + m.d_rope));
  b.out_cols(0, m.n_heads * m.d_v);
  GgmlType latent_type = s.weights[0].type;
  if (s.weights.size() == 1) {
    b.weight_computable(0) && b.weight_shape(0, m.kv_lora_rank, m.n_heads * (m.d_nope + m.d_v));
  } else {
    b.weight_computable(0) && b.weight_shape(0, m.d_nope, m.kv_lora_rank, m.n_heads);
    b.weight_computable(1) && b.weight_shape(1, m.kv_lora_rank, m.d_v, m.n_heads);
    latent_type = s.weights[1].type;  // v_b multiplies the latents directly
  }
  if (!b.ok()) return nullptr;
  const ref::ActRounding rounding =
      s.rounding == Rounding::GgmlCpu ? ref::ActRounding::GgmlCpu : ref::ActRounding::Exact;
  // The decompressed form where the file has kv_b and matmul_q takes it
  // (prefill; MlaDecompressedFast hands decode steps to the absorbed kernel).
  if (!absorbed && s.weights.size() == 1 && use_fast_matmul(s, s.weights[0].type))
    return std::make_unique<MlaDecompressedFast>(m, float(scale), s.weights);
  // Otherwise the fast path computes both kernels in the absorbed order (the
  // same function up to rounding). The reference keeps each form's own order.
  if (s.impl == Impl::Fast) return std::make_unique<MlaAbsorbedFast>(m, float(scale), s.weights);
  return std::make_unique<MlaAttention>(absorbed, m, float(scale), decode_kv_b(s, m), latent_type, rounding);
}

}  // namespace

std::unique_ptr<Kernel> make_cpu_mla_cache_store(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.arity(1, 0, 1) || !b.needs_kv()) return nullptr;
  const double eps = b.f("eps");
  const ref::RopeParams rope = read_rope_params(b);
  if (!b.ok()) return nullptr;
  b.check(s.kv->kind == KvView::Kind::MlaLatent, "the KV cache is not a latent cache");
  b.check(rope.n_dims == s.kv->v_cols, "rope n_dims ", rope.n_dims, " differs from the cache's ", s.kv->v_cols,
          " rope dims");
  b.in_cols(0, s.kv->k_cols + s.kv->v_cols);
  b.check(s.weights[0].type == GgmlType::F32, "weight '", std::string(s.weights[0].name), "' must be F32");
  b.weight_shape(0, s.kv->k_cols);
  return b.done(std::make_unique<MlaCacheStore>(float(eps), rope));
}

std::unique_ptr<Kernel> make_cpu_mla_attention(const CallSpec& s, std::string* error) {
  return make_mla(s, error, false);
}

std::unique_ptr<Kernel> make_cpu_mla_attention_absorbed(const CallSpec& s, std::string* error) {
  return make_mla(s, error, true);
}

}  // namespace kt::kern
