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
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

namespace ref = cpu::ref;

namespace {

ref::ActRounding act_rounding(Rounding r) {
  return r == Rounding::GgmlCpu ? ref::ActRounding::GgmlCpu : ref::ActRounding::Exact;
}

class MoeGate final : public Kernel {
 public:
  MoeGate(ref::MoeRouting r, ref::ActRounding rounding) : r_(r), rounding_(rounding) {}

  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &ids = a.out[0], &w = a.out[1];
    const WeightView& gate = a.weights[0];
    const int64_t n = x.rows, ne = r_.n_expert, nu = r_.n_used;
    ref::MoeRouting r = r_;
    r.selection_bias = a.weights.size() > 1 ? a.weights[1].f32() : nullptr;
    logits_.resize(size_t(n * ne));
    margins_.resize(size_t(n));
    a.par->for_range(n, [&](int64_t b, int64_t e, int) {
      ref::matmul(gate.type, gate.data, gate.ne[0], ne, x.row(b), e - b, &logits_[size_t(b * ne)], rounding_);
      ref::moe_route(&logits_[size_t(b * ne)], e - b, r, ids.i32() + b * nu, w.f32() + b * nu,
                     &margins_[size_t(b)]);
    });
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
    ev.take_runner_up = [&](int64_t t) {
      const uint8_t swap = 1;
      ref::moe_route(&logits_[size_t(t * ne)], 1, r, ids.i32() + t * nu, w.f32() + t * nu, nullptr, &swap);
    };
    a.routing->on_route(ev);
  }

 private:
  ref::MoeRouting r_;
  ref::ActRounding rounding_;
  std::vector<float> logits_, margins_;
};

class MoeExperts final : public Kernel {
 public:
  MoeExperts(ref::ActRounding rounding) : rounding_(rounding) {}

  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &ids = a.in[1], &w = a.in[2], &y = a.out[0];
    const WeightView &g = a.weights[0], &u = a.weights[1], &d = a.weights[2];
    const ref::FfnWeights f{g.type, u.type, d.type, g.data, u.data, d.data, g.ne[0], g.ne[1], rounding_};
    const int64_t nu = ids.cols;
    a.par->for_range(x.rows, [&](int64_t b, int64_t e, int) {
      ref::moe_experts(f, g.ne[2], x.row(b), e - b, ids.i32() + b * nu, w.f32() + b * nu, nu, y.row(b));
    });
  }

 private:
  ref::ActRounding rounding_;
};

}  // namespace

std::unique_ptr<Kernel> make_cpu_moe_gate(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.arity(1, 2, 1, 2) || !b.weight_computable(0)) return nullptr;
  ref::MoeRouting r;
  r.n_expert = s.weights[0].ne[1];
  r.n_used = b.i("n_used");
  const int64_t gating = b.i("gating");
  r.n_group = b.i("n_group", 1);
  r.topk_group = b.i("topk_group", 1);
  r.norm_weights = b.i("norm", 0) != 0;
  r.weights_scale = float(b.f("scale", 0.0));
  if (!b.ok()) return nullptr;
  b.check(gating == 1 || gating == 2, "gating ", gating, " is not 1 (softmax) or 2 (sigmoid)");
  r.gating = gating == 2 ? ref::MoeGating::Sigmoid : ref::MoeGating::Softmax;
  b.check(r.n_used > 0 && r.n_used <= r.n_expert, "n_used ", r.n_used, " of ", r.n_expert, " experts");
  b.check(r.n_group >= 1 && r.n_expert % r.n_group == 0 && r.topk_group >= 1 && r.topk_group <= r.n_group &&
              r.n_used <= (r.n_expert / r.n_group) * r.topk_group,
          "groups ", r.n_group, " (top ", r.topk_group, ") do not fit ", r.n_expert, " experts, ", r.n_used, " used");
  b.weight_shape(0, s.in[0].cols, r.n_expert);
  if (s.weights.size() > 1) {
    b.check(s.weights[1].type == GgmlType::F32, "bias '", std::string(s.weights[1].name), "' must be F32");
    b.weight_shape(1, r.n_expert);
  }
  b.in_type(0, GgmlType::F32);
  b.out_type(0, GgmlType::I32);
  b.out_cols(0, r.n_used);
  b.out_type(1, GgmlType::F32);
  b.out_cols(1, r.n_used);
  return b.done(std::make_unique<MoeGate>(r, act_rounding(s.rounding)));
}

std::unique_ptr<Kernel> make_cpu_moe_experts(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.arity(3, 1, 3) || !b.weight_computable(0) || !b.weight_computable(1) || !b.weight_computable(2))
    return nullptr;
  const int64_t n_embd = s.in[0].cols, n_ff = s.weights[0].ne[1], ne = s.weights[0].ne[2];
  b.weight_shape(0, n_embd, n_ff, ne);
  b.weight_shape(1, n_embd, n_ff, ne);
  b.weight_shape(2, n_ff, n_embd, ne);
  b.in_type(1, GgmlType::I32);
  b.in_type(2, GgmlType::F32);
  b.in_cols(2, s.in[1].cols);
  b.out_cols(0, n_embd);
  return b.done(std::make_unique<MoeExperts>(act_rounding(s.rounding)));
}

}  // namespace kt::kern
