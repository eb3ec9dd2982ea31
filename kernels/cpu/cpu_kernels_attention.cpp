// Attention over the KV cache on the CPU (reference path).
//
// cpu.kv_store — in[0] keys [tokens][k_cols], in[1] values [tokens][v_cols]
//   into the call's KV cache at each token's (slot, position).
// cpu.attention — out[0] [tokens][n_heads * head_dim_v] = causal GQA of in[0]
//   (queries, [tokens][n_heads * head_dim_k], roped) over the cache.
//   params: n_heads, n_kv_heads, head_dim_k, head_dim_v, kq_scale.
// Each run of a sequence's consecutive tokens (kv_rows.h) is one block of
// ops_ref.h attention(); runs are spread over threads.
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

namespace ref = cpu::ref;

namespace {

ref::ActRounding act_rounding(Rounding r) {
  return r == Rounding::GgmlCpu ? ref::ActRounding::GgmlCpu : ref::ActRounding::Exact;
}

class KvStore final : public Kernel {
 public:
  void run(const CallArgs& a) override {
    const KvView& kv = *a.kv;
    const Act &k = a.in[0], &v = a.in[1];
    a.par->for_range(k.rows, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) {
        store_row(kv.type, k.row(t), kv.k_cols, kv.k_row(a.step->slot[t], a.step->pos[t]));
        store_row(kv.type, v.row(t), kv.v_cols, kv.v_row(a.step->slot[t], a.step->pos[t]));
      }
    });
  }
};

class Attention final : public Kernel {
 public:
  Attention(int64_t n_heads, int64_t n_kv_heads, int64_t dk, int64_t dv, float kq_scale,
            ref::ActRounding rounding)
      : n_heads_(n_heads), n_kv_heads_(n_kv_heads), dk_(dk), dv_(dv), kq_scale_(kq_scale), rounding_(rounding) {}

  void run(const CallArgs& a) override {
    const std::vector<Run> runs = step_runs(*a.step);
    const Act &q = a.in[0], &y = a.out[0];
    a.par->for_range(int64_t(runs.size()), [&](int64_t b, int64_t e, int) {
      std::vector<float> k, v;
      for (int64_t i = b; i < e; ++i) {
        const Run& r = runs[size_t(i)];
        load_cache(*a.kv, r.slot, r.pos0 + r.n, k, v);
        ref::attention(q.row(r.first), k.data(), v.data(), r.n, r.pos0, n_heads_, n_kv_heads_, dk_, dv_,
                       kq_scale_, y.row(r.first), rounding_);
      }
    });
  }

 private:
  int64_t n_heads_, n_kv_heads_, dk_, dv_;
  float kq_scale_;
  ref::ActRounding rounding_;
};

}  // namespace

std::unique_ptr<Kernel> make_cpu_kv_store(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (b.arity(2, 0, 0) && b.needs_kv()) {
    b.check(s.kv->kind == KvView::Kind::Kv, "the KV cache is not a key/value cache");
    b.in_cols(0, s.kv->k_cols);
    b.in_cols(1, s.kv->v_cols);
  }
  return b.done(std::make_unique<KvStore>());
}

std::unique_ptr<Kernel> make_cpu_attention(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.arity(1, 1, 0) || !b.needs_kv()) return nullptr;
  const int64_t h = b.i("n_heads"), hkv = b.i("n_kv_heads"), dk = b.i("head_dim_k"), dv = b.i("head_dim_v");
  const double scale = b.f("kq_scale");
  if (!b.ok()) return nullptr;
  b.check(h > 0 && hkv > 0 && h % hkv == 0, "n_heads ", h, " is not a multiple of n_kv_heads ", hkv);
  b.check(s.kv->kind == KvView::Kind::Kv && s.kv->k_cols == hkv * dk && s.kv->v_cols == hkv * dv,
          "the KV cache does not hold ", hkv, " heads of ", dk, " + ", dv);
  b.in_cols(0, h * dk);
  b.out_cols(0, h * dv);
  return b.done(std::make_unique<Attention>(h, hkv, dk, dv, float(scale), act_rounding(s.rounding)));
}

}  // namespace kt::kern
