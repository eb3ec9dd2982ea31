// Mixture of experts on the CPU (reference path).
//
// cpu.moe_gate — the router: logits = in[0] [tokens][n_embd] x weights[0]
//   (ggml [n_embd, n_expert]), then ops_ref.h moe_route with the selection
//   bias weights[1] (F32 [n_expert], DeepSeek-V3's e_score_correction_bias)
//   when present. out[0] ids (I32) and out[1] weights (F32), [tokens][n_used].
//   params: n_used, gating (1 softmax, 2 sigmoid), n_group, topk_group,
//   norm (0/1: renormalise the chosen weights), scale (0 or 1: none).
//   The step's RoutingHook, if any, sees the choice and may change it.
// cpu.moe_experts — out[0] [tokens][n_embd] = sum_k weights[t][k] *
//   FFN_{ids[t][k]}(x[t]) with in[0] x, in[1] ids, in[2] weights and
//   weights[0..2] gate/up/down_exps (ggml [n_in, n_out, n_expert]).
//   Fast path, the fused MoE operator: the step's tokens are grouped by
//   expert; each active expert's rows are quantized once (with AMX also laid
//   out once as the tiles' activations, matmul_q.h tile_acts), then work items
//   (expert, block of rows) of gate+up (with SiLU-GLU) and then of down are
//   split over the threads by ranges that threads done early take from, so
//   experts with more tokens and slower cores balance out (with repacked
//   weights at prefill a gate+up item also rounds its chunk of the SwiGLU for
//   down: glu_rounded); each weight byte of an active expert is read
//   once per step however many of the step's tokens chose it. The combine
//   sums each token's experts in the reference's order. Param bf16_rows (> 0):
//   an expert with at least that many of the step's rows computes in BF16
//   (matmul_bf16.h; KTransformers' AMXBF16), its rows packed as BF16 tiles.
//   Weights repacked at load (WeightLayout::Int8 or Int4; KTransformers'
//   AMXInt8 or AMXInt4, all three alike or none): every product is
//   matmul_i8's, at decode too, and the reference computes with
//   ref::ActRounding::Int8 or Int4 from the file's bytes.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_i8.h"
#include "kernels/cpu/matmul_q.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/cpu/work_split.h"
#include "kernels/kernel_bind.h"
#include "kernels/moe_contract.h"

namespace kt::kern {

namespace ref = cpu::ref;

namespace {

ref::ActRounding act_rounding(Rounding r) {
  return r == Rounding::GgmlCpu ? ref::ActRounding::GgmlCpu : ref::ActRounding::Exact;
}

class MoeGate final : public Kernel {
 public:
  // fast: the router's product through matmul_q (the routing itself is cheap).
  MoeGate(ref::MoeRouting r, ref::ActRounding rounding, bool fast) : r_(r), rounding_(rounding), fast_(fast) {}
  std::string_view impl() const override { return fast_ ? cpu::matmul_q_impl(GgmlType::F32) : "reference"; }

  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &ids = a.out[0], &w = a.out[1];
    const WeightView& gate = a.weights[0];
    const int64_t n = x.rows, ne = r_.n_expert, nu = r_.n_used;
    ref::MoeRouting r = r_;
    r.selection_bias = a.weights.size() > 1 ? a.weights[1].f32() : nullptr;
    logits_.resize(size_t(n * ne));
    margins_.resize(size_t(n));
    if (fast_) {
      const int64_t n_in = gate.ne[0];
      const size_t arb = cpu::act_row_bytes(gate.type, n_in);
      auto* xq = static_cast<uint8_t*>(scratch(0, size_t(n) * arb));
      cpu::quantize_acts(gate.type, x.f32(), n_in, n, n_in, xq);
      // Items (token, block of experts): a decoding token's router reads its
      // whole matrix (512 KB of F32 for 64 experts of 2048), which one core
      // streams at a seventh of the machine's bandwidth (61 us a call on the
      // device's Xeon). A prompt's items are runs of up to 8 tokens, which
      // matmul_q multiplies by each weight row once (an item a token read the
      // matrix once a token: a 512-token V2-Lite prefill's 26 routers 38 -> 33
      // ms on the device; what remains is the float products, bound by their
      // activation loads, and top_k's sorts). Each logit is computed as before,
      // wherever it runs (matmul_q sums a row alike whatever the batch).
      const int64_t blocks = std::clamp<int64_t>(a.par->n_threads() / std::max<int64_t>(n, 1), 1, (ne + 7) / 8);
      const int64_t per = (ne + blocks - 1) / blocks;
      const int64_t run = blocks > 1 ? 1 : std::clamp<int64_t>(n / a.par->n_threads(), 1, 8);
      const int64_t runs = (n + run - 1) / run;
      for_each_item(*a.par, runs * blocks, worth_threads(n * n_in * ne), [&](int64_t item, int) {
        const int64_t t = item / blocks * run, nt = std::min(run, n - t);
        const int64_t o0 = item % blocks * per, o1 = std::min(ne, o0 + per);
        if (o0 < o1)
          cpu::matmul_q(gate.type, gate.data, gate.row_bytes(), n_in, xq + size_t(t) * arb, nt,
                        &logits_[size_t(t * ne)], ne, o0, o1);
        if (blocks == 1)
          for (int64_t k = t; k < t + nt; ++k)
            ref::moe_route(&logits_[size_t(k * ne)], 1, r, ids.i32() + k * nu, w.f32() + k * nu, &margins_[size_t(k)]);
      });
      if (blocks > 1)
        for (int64_t t = 0; t < n; ++t)
          ref::moe_route(&logits_[size_t(t * ne)], 1, r, ids.i32() + t * nu, w.f32() + t * nu, &margins_[size_t(t)]);
    } else {
      a.par->for_range(n, [&](int64_t b, int64_t e, int) {
        ref::matmul(gate.type, gate.data, gate.ne[0], ne, x.row(b), e - b, &logits_[size_t(b * ne)], rounding_);
        ref::moe_route(&logits_[size_t(b * ne)], e - b, r, ids.i32() + b * nu, w.f32() + b * nu,
                       &margins_[size_t(b)]);
      });
    }
    if (!a.routing) return;
    RouteEvent ev;
    ev.layer = a.layer;
    ev.step = a.step;
    ev.n_expert = ne;
    ev.n_used = nu;
    ev.logits = logits_.data();
    ev.margins = margins_.data();
    ev.ids = ids.i32();
    ev.weights = w.f32();
    ev.take_runner_up = [&](int64_t t, int k) {
      const uint8_t swap = uint8_t(k);
      ref::moe_route(&logits_[size_t(t * ne)], 1, r, ids.i32() + t * nu, w.f32() + t * nu, nullptr, &swap);
    };
    a.routing->on_route(ev);
  }

 private:
  ref::MoeRouting r_;
  ref::ActRounding rounding_;
  bool fast_;
  std::vector<float> logits_, margins_;
};

// The part of the sum a call computes (ops_ref.h ExpertSubset): expert id ->
// slice of the weights, -1 where another device holds it (the `expert_slots`
// param; empty: every id is its own slice), and the range of each token's
// choices (the `choices` param [begin, end); deferral splits them).
class ExpertSlots {
 public:
  ExpertSlots() = default;
  ExpertSlots(std::vector<int64_t> s, int64_t k_begin, int64_t k_end) : k_begin_(k_begin), k_end_(k_end) {
    for (int64_t v : s) slots_.push_back(int32_t(v));
  }
  ref::ExpertSubset subset(const uint8_t* bf16 = nullptr) const {
    return {slots_.empty() ? nullptr : slots_.data(), int64_t(slots_.size()), k_begin_, k_end_, bf16};
  }
  // flags[slice] = 1 where at least min_rows of the step's (token, choice)
  // pairs computed here fall on that slice (the `bf16_rows` param).
  void bf16_flags(const int32_t* ids, int64_t n_pairs, int64_t nu, int64_t n_mat, int64_t min_rows,
                  std::vector<uint8_t>& flags) const {
    std::vector<int64_t> count(size_t(n_mat), 0);
    for (int64_t i = 0; i < n_pairs; ++i) {
      const int32_t m = (*this)(ids[i], i % nu, n_mat);
      if (m >= 0 && m < n_mat) ++count[size_t(m)];
    }
    flags.assign(size_t(n_mat), 0);
    for (int64_t m = 0; m < n_mat; ++m) flags[size_t(m)] = count[size_t(m)] >= min_rows ? 1 : 0;
  }
  // The slice of choice k of expert `id`, -1 when it is not computed here.
  int32_t operator()(int32_t id, int64_t k, int64_t n_mat) const {
    if (k < k_begin_ || (k_end_ >= 0 && k >= k_end_)) return -1;
    if (slots_.empty()) return id >= 0 && id < n_mat ? id : -1;
    return id >= 0 && size_t(id) < slots_.size() ? slots_[size_t(id)] : -1;
  }

 private:
  std::vector<int32_t> slots_;
  int64_t k_begin_ = 0, k_end_ = -1;
};

class MoeExperts final : public Kernel {
 public:
  MoeExperts(ref::ActRounding rounding, ExpertSlots slots, int64_t bf16_rows)
      : rounding_(rounding), slots_(std::move(slots)), bf16_rows_(bf16_rows) {}

  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &ids = a.in[1], &w = a.in[2], &y = a.out[0];
    const WeightView &g = a.weights[0], &u = a.weights[1], &d = a.weights[2];
    // Repacked weights: the reference reads the file's bytes (host).
    const bool file = g.layout != WeightLayout::Gguf;
    const ref::FfnWeights f{g.type, u.type, d.type, file ? g.host : g.data, file ? u.host : u.data,
                            file ? d.host : d.data, g.ne[0], g.ne[1], rounding_};
    const int64_t nu = ids.cols;
    // Which slices compute in BF16 depends on the whole step's choices.
    if (bf16_rows_ > 0) slots_.bf16_flags(ids.i32(), x.rows * nu, nu, g.ne[2], bf16_rows_, bf16_);
    a.par->for_range(x.rows, [&](int64_t b, int64_t e, int) {
      ref::moe_experts(f, g.ne[2], x.row(b), e - b, ids.i32() + b * nu, w.f32() + b * nu, nu, y.row(b),
                       slots_.subset(bf16_rows_ > 0 ? bf16_.data() : nullptr));
    });
  }

 private:
  ref::ActRounding rounding_;
  ExpertSlots slots_;
  int64_t bf16_rows_;
  std::vector<uint8_t> bf16_;
};

class MoeExpertsFast final : public Kernel {
 public:
  // repacked: the weights' matmul_i8 values (WeightLayout::Int8 or Int4), or
  // none for the file's blocks.
  MoeExpertsFast(GgmlType gate, GgmlType up, GgmlType down, ExpertSlots slots, int64_t bf16_rows,
                 std::optional<cpu::WeightBits> repacked)
      : impl_(!repacked ? fast_matmul_impl(gate, bf16_rows)
                        : std::string(*repacked == cpu::WeightBits::Int4 ? "int4 " : "int8 ") + cpu::matmul_i8_impl()),
        slots_(std::move(slots)),
        bf16_rows_(bf16_rows),
        repacked_(repacked) {
    same_act_ = repacked_ || (cpu::act_row_bytes(gate, 256) == cpu::act_row_bytes(up, 256) && gate == up);
  }
  std::string_view impl() const override { return impl_; }

  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &ids = a.in[1], &wts = a.in[2], &y = a.out[0];
    const WeightView &g = a.weights[0], &u = a.weights[1], &d = a.weights[2];
    const int64_t n = x.rows, nu = ids.cols, n_embd = g.ne[0], n_ff = g.ne[1], n_expert = g.ne[2];

    // Group the (token, k) pairs by the slice of their expert: a counting
    // sort, in token order. Pairs of experts held elsewhere get no row.
    mat_of_.resize(size_t(n * nu));
    count_.assign(size_t(n_expert) + 1, 0);
    for (int64_t i = 0; i < n * nu; ++i) {
      mat_of_[size_t(i)] = slots_(ids.i32()[i], i % nu, n_expert);
      if (mat_of_[size_t(i)] >= 0) ++count_[size_t(mat_of_[size_t(i)]) + 1];
    }
    for (int64_t e = 0; e < n_expert; ++e) count_[size_t(e) + 1] += count_[size_t(e)];
    slot_of_.resize(size_t(n * nu));  // (t, k) -> row in the grouped order, -1: not here
    token_of_.resize(size_t(n * nu));
    pos_ = count_;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t k = 0; k < nu; ++k) {
        const int32_t m = mat_of_[size_t(t * nu + k)];
        if (m < 0) {
          slot_of_[size_t(t * nu + k)] = -1;
          continue;
        }
        const int64_t r = pos_[size_t(m)]++;
        slot_of_[size_t(t * nu + k)] = r;
        token_of_[size_t(r)] = int32_t(t);
      }
    active_.clear();
    for (int64_t e = 0; e < n_expert; ++e)
      if (count_[size_t(e) + 1] > count_[size_t(e)]) active_.push_back(int32_t(e));
    const int64_t rows = count_[size_t(n_expert)];  // grouped rows, expert by expert
    // Experts with bf16_rows or more rows compute in BF16 (matmul_bf16.h): their
    // rows are packed as BF16 tiles instead of quantized.
    bf16_off_.assign(size_t(n_expert), kNoTiles);
    bf16_h_off_.assign(size_t(n_expert), kNoTiles);
    size_t bf16_x_bytes = 0, bf16_h_bytes = 0;
    for (int32_t e : active_) {
      const int64_t m = count_[size_t(e) + 1] - count_[size_t(e)];
      if (bf16_rows_ <= 0 || m < bf16_rows_) continue;
      bf16_off_[size_t(e)] = bf16_x_bytes, bf16_x_bytes += cpu::bf16_acts_bytes(n_embd, m);
      bf16_h_off_[size_t(e)] = bf16_h_bytes, bf16_h_bytes += cpu::bf16_acts_bytes(n_ff, m);
    }
    row_bf16_.resize(size_t(rows));
    for (int32_t e : active_)
      for (int64_t r = count_[size_t(e)]; r < count_[size_t(e) + 1]; ++r) row_bf16_[size_t(r)] = bf16_off_[size_t(e)] != kNoTiles;

    const size_t arb_gate = act_bytes(g.type, n_embd), arb_up = act_bytes(u.type, n_embd);
    const size_t arb_down = act_bytes(d.type, n_ff);
    auto* xq_gate = static_cast<uint8_t*>(scratch(0, size_t(rows) * arb_gate));
    auto* xq_up = same_act_ ? xq_gate : static_cast<uint8_t*>(scratch(1, size_t(rows) * arb_up));
    // Repacked experts at prefill (on average a tile's worth of rows or more
    // an expert) take gate, up, the SwiGLU and the down's rounding in one
    // item (glu_rounded); else the SwiGLU's rows go through h.
    const bool fuse_glu = repacked_ && rows >= cpu::kI8TileMinBatch * int64_t(active_.size());
    auto* h = fuse_glu ? nullptr : static_cast<float*>(scratch(2, size_t(rows * n_ff) * 2 * sizeof(float)));  // gate | up
    auto* hq = static_cast<uint8_t*>(scratch(3, size_t(rows) * arb_down));
    auto* ye = static_cast<float*>(scratch(4, size_t(rows * n_embd) * sizeof(float)));
    auto* bx = static_cast<uint8_t*>(scratch(8, bf16_x_bytes));
    auto* bh = static_cast<uint8_t*>(scratch(9, bf16_h_bytes));
    const bool par = worth_threads(rows * n_embd * n_ff);

    // Each grouped row's activations, quantized for gate (and up); a BF16
    // expert's packed from its tokens' rows in one go.
    for_each_item_by_range(*a.par, rows, par, [&](int64_t r, int) {
      if (row_bf16_[size_t(r)]) return;
      const float* xr = x.row(token_of_[size_t(r)]);
      quantize(g.type, xr, n_embd, xq_gate + size_t(r) * arb_gate);
      if (!same_act_) quantize(u.type, xr, n_embd, xq_up + size_t(r) * arb_up);
    });

    // With AMX, each expert's rows are laid out once as the tiles' activations
    // (else every (expert, block of rows) call below would gather them again).
    const size_t tiles_gate = tile_offsets(g.type, n_embd, tile_gate_);
    const size_t tiles_up = same_act_ ? 0 : tile_offsets(u.type, n_embd, tile_up_);
    const size_t tiles_down = tile_offsets(d.type, n_ff, tile_down_);
    auto* tg = static_cast<uint8_t*>(scratch(5, tiles_gate));
    auto* tu = same_act_ ? tg : static_cast<uint8_t*>(scratch(6, tiles_up));
    auto* td = static_cast<uint8_t*>(scratch(7, tiles_down));
    // Each active expert's quantized rows (xq, arb bytes a row) into its tiles at off.
    auto tile_experts = [&](GgmlType t, const uint8_t* xq, size_t arb, int64_t n_in, const std::vector<size_t>& off,
                            uint8_t* tiles) {
      for_each_item_by_range(*a.par, int64_t(active_.size()), par, [&](int64_t i, int) {
        const int32_t e = active_[size_t(i)];
        const int64_t r0 = count_[size_t(e)], m = count_[size_t(e) + 1] - r0;
        if (off[size_t(e)] == kNoTiles) return;
        if (repacked_) cpu::tile_acts_i8(xq + size_t(r0) * arb, n_in, m, tiles + off[size_t(e)]);
        else cpu::tile_acts(t, xq + size_t(r0) * arb, n_in, m, tiles + off[size_t(e)]);
      });
    };
    if (bf16_x_bytes > 0) {
      // Gathered into ye first (free until down runs): pack_bf16_acts takes strided rows.
      for_each_item_by_range(*a.par, int64_t(active_.size()), par, [&](int64_t i, int) {
        const int32_t e = active_[size_t(i)];
        if (bf16_off_[size_t(e)] == kNoTiles) return;
        const int64_t r0 = count_[size_t(e)], m = count_[size_t(e) + 1] - r0;
        float* rows_x = ye + r0 * n_embd;
        for (int64_t r = r0; r < r0 + m; ++r)
          std::copy_n(x.row(token_of_[size_t(r)]), n_embd, rows_x + (r - r0) * n_embd);
        cpu::pack_bf16_acts(rows_x, n_embd, n_embd, m, bx + bf16_off_[size_t(e)]);
      });
    }
    if (tiles_gate > 0) tile_experts(g.type, xq_gate, arb_gate, n_embd, tile_gate_, tg);
    if (tiles_up > 0) tile_experts(u.type, xq_up, arb_up, n_embd, tile_up_, tu);
    const std::vector<size_t>& tile_up = same_act_ ? tile_gate_ : tile_up_;
    // One matrix of expert e over its rows r0.. (m of them) and outputs [o0, o1).
    // b16: the BF16 tiles' buffer (bx or bh) and offsets, used for a BF16 expert.
    auto product = [&](const WeightView& wv, int32_t e, const uint8_t* xq, size_t arb, const uint8_t* tiles,
                       const std::vector<size_t>& off, const uint8_t* b16, const std::vector<size_t>& b16_off,
                       int64_t n_in, float* out, int64_t n_out, int64_t o0, int64_t o1) {
      const int64_t r0 = count_[size_t(e)], m = count_[size_t(e) + 1] - r0;
      if (repacked_) {
        const uint8_t* mat = wv.bytes() + size_t(e) * cpu::i8_matrix_bytes(n_in, n_out, *repacked_);
        cpu::matmul_i8(mat, n_in, n_out, xq + size_t(r0) * arb,
                       off[size_t(e)] != kNoTiles ? tiles + off[size_t(e)] : nullptr, m, out + r0 * n_out, n_out, o0,
                       o1, *repacked_);
      } else if (b16_off[size_t(e)] != kNoTiles)
        cpu::matmul_bf16(wv.type, wv.mat(e), wv.row_bytes(), n_in, b16 + b16_off[size_t(e)], m, out + r0 * n_out,
                         n_out, o0, o1);
      else if (off[size_t(e)] != kNoTiles)
        cpu::matmul_q_tiled(wv.type, wv.mat(e), wv.row_bytes(), n_in, tiles + off[size_t(e)], m, out + r0 * n_out,
                            n_out, o0, o1);
      else
        cpu::matmul_q(wv.type, wv.mat(e), wv.row_bytes(), n_in, xq + size_t(r0) * arb, m, out + r0 * n_out, n_out,
                      o0, o1);
    };

    // gate + up + SiLU-GLU over (expert, block of n_ff rows). Every phase here
    // splits its items by range (for_each_item_by_range): a thread's range is
    // a run of experts, so the thread that rounded and tiled an expert's rows
    // reads them from its own cache for each of that expert's blocks (items
    // from a shared counter read them from another core's: old / new, V2-Lite
    // int4 on the device, six alternations, 512 tokens 4.14 -> 4.32 TFLOP/s,
    // 2048 5.2 -> 5.6; a 512-token CPU-only prefill 825 / 854 -> 873 / 900 tok/s).
    if (fuse_glu) {
      glu_rounded(*a.par, g, u, xq_gate, arb_gate, tg, n_embd, n_ff, hq, arb_down);
    } else {
      const int64_t ff_block = block_rows(n_ff, a.par->n_threads());
      const int64_t ff_blocks = (n_ff + ff_block - 1) / ff_block;
      float* gate_out = h;
      float* up_out = h + rows * n_ff;
      for_each_item_by_range(*a.par, int64_t(active_.size()) * ff_blocks, par, [&](int64_t item, int) {
        const int32_t e = active_[size_t(item / ff_blocks)];
        const int64_t r0 = count_[size_t(e)], m = count_[size_t(e) + 1] - r0;
        const int64_t o0 = (item % ff_blocks) * ff_block, o1 = std::min(n_ff, o0 + ff_block);
        product(g, e, xq_gate, arb_gate, tg, tile_gate_, bx, bf16_off_, n_embd, gate_out, n_ff, o0, o1);
        product(u, e, xq_up, arb_up, tu, tile_up, bx, bf16_off_, n_embd, up_out, n_ff, o0, o1);
        for (int64_t r = r0; r < r0 + m; ++r)
          vec::silu_mul(gate_out + r * n_ff + o0, up_out + r * n_ff + o0, o1 - o0, gate_out + r * n_ff + o0);
      });
      for_each_item_by_range(*a.par, rows, par, [&](int64_t r, int) {
        if (!row_bf16_[size_t(r)]) quantize(d.type, gate_out + r * n_ff, n_ff, hq + size_t(r) * arb_down);
      });
      if (bf16_h_bytes > 0)
        for_each_item_by_range(*a.par, int64_t(active_.size()), par, [&](int64_t i, int) {
          const int32_t e = active_[size_t(i)];
          if (bf16_h_off_[size_t(e)] == kNoTiles) return;
          const int64_t r0 = count_[size_t(e)], m = count_[size_t(e) + 1] - r0;
          cpu::pack_bf16_acts(gate_out + r0 * n_ff, n_ff, n_ff, m, bh + bf16_h_off_[size_t(e)]);
        });
    }
    if (tiles_down > 0) tile_experts(d.type, hq, arb_down, n_ff, tile_down_, td);

    // down over (expert, block of n_embd rows).
    const int64_t emb_block = block_rows(n_embd, a.par->n_threads());
    const int64_t emb_blocks = (n_embd + emb_block - 1) / emb_block;
    for_each_item_by_range(*a.par, int64_t(active_.size()) * emb_blocks, par, [&](int64_t item, int) {
      const int32_t e = active_[size_t(item / emb_blocks)];
      const int64_t o0 = (item % emb_blocks) * emb_block, o1 = std::min(n_embd, o0 + emb_block);
      product(d, e, hq, arb_down, td, tile_down_, bh, bf16_h_off_, n_ff, ye, n_embd, o0, o1);
    });

    // Combine in the reference's order: k = 0 .. n_used - 1, in double. Choice
    // by choice over a span of values (a loop the compiler vectorizes; one value
    // at a time across the choices it did not: 5 ms of a 512-token V2-Lite
    // layer on two cores; on the device, int8 experts, 16 threads, alternating:
    // 4.08 / 4.37 -> 4.30 / 4.55 TFLOP/s at 512 tokens), each value the same
    // sum in the same order.
    for_each_item(*a.par, n, par, [&](int64_t t, int) {
      float* out = y.row(t);
      const int64_t* slots = slot_of_.data() + t * nu;
      const float* wt = wts.f32() + t * nu;
      constexpr int64_t kSpan = 256;
      double acc[kSpan];
      for (int64_t i0 = 0; i0 < n_embd; i0 += kSpan) {
        const int64_t m = std::min(kSpan, n_embd - i0);
        std::fill_n(acc, m, 0.0);
        for (int64_t k = 0; k < nu; ++k) {
          if (slots[k] < 0) continue;
          const double w = double(wt[k]);
          const float* src = ye + slots[k] * n_embd + i0;
          for (int64_t i = 0; i < m; ++i) acc[i] += w * double(src[i]);
        }
        for (int64_t i = 0; i < m; ++i) out[i0 + i] = float(acc[i]);
      }
    });
  }

 private:
  // Rows per work item: whole panels of 32 (matmul_bf16's two tiles of rows; two
  // of matmul_q's AMX tiles), small enough that every thread gets several
  // items even for one expert.
  static int64_t block_rows(int64_t n, int threads) {
    return std::max<int64_t>(32, std::min<int64_t>(128, (n / (2 * threads) + 31) / 32 * 32));
  }

  // Repacked experts: items of (expert, block of its rows, chunk of 256 of
  // the n_ff outputs), each computing its outputs of gate and up for the
  // block's rows into the thread's buffers, their SwiGLU, and that chunk of
  // the block's rows rounded for down into hq (the down's chunks are these 256
  // values, so a chunk is complete in one item). Items of 64 outputs wrote gate
  // and up to h (2 x rows x n_ff floats: 35 MB at a 512-token V2-Lite step,
  // every line fetched for ownership and written back) and a pass of its own
  // read the SwiGLU back to round it. An expert's rows go in blocks of at most
  // 128 (matmul_i8's AMX loop streams the weights once per 128 rows anyway), so
  // a step whose tokens chose few experts still has items for every thread.
  // Each value is the same as in the other form: a row's sum does not depend on
  // the rows or outputs beside it.
  struct RowBlock {
    int32_t expert;
    int64_t first, rows;  // of the expert's rows
  };
  void glu_rounded(Parallel& par, const WeightView& g, const WeightView& u, const uint8_t* xq, size_t arb,
                   const uint8_t* tiles, int64_t n_embd, int64_t n_ff, uint8_t* hq, size_t arb_down) {
    constexpr int64_t kMaxRows = 128;
    const cpu::WeightBits bits = *repacked_;
    const int64_t chunks = cpu::i8_chunks(n_ff);
    const size_t mat_bytes = cpu::i8_matrix_bytes(n_embd, n_ff, bits);
    // (expert, first row, rows): blocks of an expert's rows as even as
    // multiples of 16 allow, so none is left with too few rows for the tiles.
    blocks_.clear();
    for (int32_t e : active_) {
      const int64_t r0 = count_[size_t(e)], m = count_[size_t(e) + 1] - r0;
      const int64_t nb = (m + kMaxRows - 1) / kMaxRows, per = ((m + nb - 1) / nb + 15) / 16 * 16;
      for (int64_t b = 0; b < m; b += per) blocks_.push_back({e, b, std::min(per, m - b)});
    }
    for_each_item_by_range(par, int64_t(blocks_.size()) * chunks, true, [&](int64_t item, int) {
      const RowBlock& rb = blocks_[size_t(item / chunks)];
      const int64_t r0 = count_[size_t(rb.expert)] + rb.first, m = rb.rows;
      const int64_t c = item % chunks, o0 = c * cpu::kI8Chunk, n_o = std::min(cpu::kI8Chunk, n_ff - o0);
      auto* buf = static_cast<float*>(scratch(10, size_t(kMaxRows) * 2 * cpu::kI8Chunk * sizeof(float)));
      float* gate = buf;
      float* up = buf + kMaxRows * cpu::kI8Chunk;
      // The block's tiles: the expert's, from its first row's tile of 16.
      const size_t t_off = tile_gate_[size_t(rb.expert)];
      const uint8_t* t = t_off != kNoTiles ? tiles + t_off + cpu::i8_tiles_offset(n_embd, rb.first) : nullptr;
      const size_t rows_at = size_t(rb.expert) * mat_bytes + cpu::i8_rows_offset(n_embd, o0, bits);
      const uint8_t* x = xq + size_t(r0) * arb;
      cpu::matmul_i8(g.bytes() + rows_at, n_embd, n_o, x, t, m, gate, cpu::kI8Chunk, 0, n_o, bits);
      cpu::matmul_i8(u.bytes() + rows_at, n_embd, n_o, x, t, m, up, cpu::kI8Chunk, 0, n_o, bits);
      for (int64_t r = 0; r < m; ++r) {
        float* v = gate + r * cpu::kI8Chunk;
        vec::silu_mul(v, up + r * cpu::kI8Chunk, n_o, v);
        cpu::quantize_act_chunk_i8(v, n_ff, c, hq + size_t(r0 + r) * arb_down);
      }
    });
  }
  // Where each active expert's tiled activations start in a matrix's buffer
  // (kNoTiles: matmul_q takes the quantized rows); returns the buffer's size.
  static constexpr size_t kNoTiles = ~size_t(0);
  size_t tile_offsets(GgmlType t, int64_t n_in, std::vector<size_t>& off) const {
    off.assign(count_.size(), kNoTiles);
    size_t total = 0;
    for (int32_t e : active_) {
      if (bf16_off_[size_t(e)] != kNoTiles) continue;  // a BF16 expert: its own tiles
      const int64_t m = count_[size_t(e) + 1] - count_[size_t(e)];
      const size_t b = repacked_ ? cpu::i8_tiles_bytes(n_in, m) : cpu::tiled_acts_bytes(t, n_in, m);
      if (b > 0) off[size_t(e)] = total, total += b;
    }
    return total;
  }

  // A row of activations for a matrix of type t, and its quantization: the
  // type's 8-bit blocks, or int8 chunks for the repacked experts (int8 or int4
  // weights alike).
  size_t act_bytes(GgmlType t, int64_t n) const {
    return repacked_ ? cpu::i8_act_row_bytes(n) : cpu::act_row_bytes(t, n);
  }
  void quantize(GgmlType t, const float* x, int64_t n, uint8_t* dst) const {
    if (repacked_) cpu::quantize_acts_i8(x, n, 1, n, dst);
    else cpu::quantize_acts(t, x, n, 1, n, dst);
  }

  std::string impl_;  // matmul_q's kernel, and matmul_bf16's where bf16_rows asks for it
  ExpertSlots slots_;
  int64_t bf16_rows_;
  // The weights' values when repacked (WeightLayout::Int8 or Int4: matmul_i8's
  // products), none for the file's blocks.
  std::optional<cpu::WeightBits> repacked_;
  std::vector<size_t> tile_gate_, tile_up_, tile_down_, bf16_off_, bf16_h_off_;
  std::vector<uint8_t> row_bf16_;
  bool same_act_ = false;
  std::vector<int64_t> count_, pos_, slot_of_;
  std::vector<int32_t> token_of_, active_, mat_of_;
  std::vector<RowBlock> blocks_;  // glu_rounded's items' blocks of rows
};

}  // namespace

std::unique_ptr<Kernel> make_cpu_moe_gate(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.arity(1, 2, 1, 2) || !b.weight_computable(0)) return nullptr;
  ref::MoeRouting r;
  if (!bind_moe_gate(b, s, &r)) return nullptr;
  return b.done(std::make_unique<MoeGate>(r, act_rounding(s.rounding), use_fast_matmul(s, s.weights[0].type)));
}

std::unique_ptr<Kernel> make_cpu_moe_experts(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  MoeExpertsShape shape;
  if (!bind_moe_experts(b, s, &shape) || !b.weight_computable(0) || !b.weight_computable(1) ||
      !b.weight_computable(2))
    return nullptr;
  std::vector<int64_t> v = std::move(shape.slots), choices = b.ints("choices");
  const int64_t nu = shape.n_used;
  if (!choices.empty())
    b.check(choices.size() == 2 && choices[0] >= 0 && choices[0] < choices[1] && choices[1] <= nu,
            "choices must be [begin, end) within the ", nu, " used experts");
  if (!b.ok()) return nullptr;
  ExpertSlots slots(std::move(v), choices.empty() ? 0 : choices[0], choices.empty() ? -1 : choices[1]);
  const GgmlType tg = s.weights[0].type, tu = s.weights[1].type, td = s.weights[2].type;
  const int64_t bf16_rows = b.i("bf16_rows", 0);
  if (!b.check(bf16_rows >= 0, "bf16_rows must be >= 0")) return nullptr;
  // Repacked (int8 or int4): all three alike, as one operator reads them.
  const WeightLayout layout = s.weights[0].layout;
  for (size_t k = 0; k < 3; ++k) {
    WeightLayout l0 = layout, lk = s.weights[k].layout;
    if (l0 == WeightLayout::Gguf) std::swap(l0, lk);
    b.check(lk == l0, "weights '", std::string(s.weights[0].name), "' and '", std::string(s.weights[k].name),
            "': repacked to ", layout_name(l0),
            lk == WeightLayout::Gguf ? std::string(" one and not the other")
                                     : std::string(" one and to ") + layout_name(lk) + " the other");
    b.accept_repacked(k);
  }
  std::optional<cpu::WeightBits> repacked;
  if (layout == WeightLayout::Int8) repacked = cpu::WeightBits::Int8;
  if (layout == WeightLayout::Int4) repacked = cpu::WeightBits::Int4;
  if (!b.check(!repacked || bf16_rows == 0, "experts repacked to ", layout_name(layout), " take no bf16_rows"))
    return nullptr;
  // Repacked experts have one arithmetic (int8 or int4 weights by int8
  // activations), so the call's rounding does not choose between the kernels;
  // only asking for the reference does.
  const bool fast = repacked ? s.impl == Impl::Fast
                             : use_fast_matmul(s, tg) && use_fast_matmul(s, tu) && use_fast_matmul(s, td);
  if (fast) return b.done(std::make_unique<MoeExpertsFast>(tg, tu, td, std::move(slots), bf16_rows, repacked));
  const ref::ActRounding rounding = !repacked ? act_rounding(s.rounding)
                                    : *repacked == cpu::WeightBits::Int4 ? ref::ActRounding::Int4
                                                                         : ref::ActRounding::Int8;
  return b.done(std::make_unique<MoeExperts>(rounding, std::move(slots), bf16_rows));
}

}  // namespace kt::kern
