// cpu.rope — rotates, in place in out[0] (a copy of in[0] when they differ),
// the first n_dims values at `offset` of each of n_heads heads (head_dim
// apart) of every token row, at the token's position (ggml_rope_ext, plain,
// NeoX or YaRN: ops_ref.h RopeParams).
// params: n_dims, mode (0 normal, 2 NeoX), freq_base, freq_scale, n_ctx_orig,
// ext_factor, attn_factor, beta_fast, beta_slow, n_heads, head_dim, offset.
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/ops_ref.h"
#include "kernels/cpu/rope_params.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

namespace ref = cpu::ref;

ref::RopeParams read_rope_params(Binder& b) {
  ref::RopeParams p;
  p.n_dims = int(b.i("n_dims"));
  const int64_t mode = b.i("mode", 0);
  b.check(mode == 0 || mode == 2, "rope mode ", mode, " is not 0 (normal) or 2 (NeoX)");
  p.mode = mode == 2 ? ref::RopeMode::NeoX : ref::RopeMode::Normal;
  p.freq_base = float(b.f("freq_base"));
  p.freq_scale = float(b.f("freq_scale", 1.0));
  p.n_ctx_orig = int(b.i("n_ctx_orig", 0));
  p.ext_factor = float(b.f("ext_factor", 0.0));
  p.attn_factor = float(b.f("attn_factor", 1.0));
  p.beta_fast = float(b.f("beta_fast", 32.0));
  p.beta_slow = float(b.f("beta_slow", 1.0));
  b.check(p.n_dims > 0 && p.n_dims % 2 == 0, "n_dims ", p.n_dims, " must be even and positive");
  return p;
}

namespace {

class Rope final : public Kernel {
 public:
  Rope(ref::RopeParams p, int64_t n_heads, int64_t head_dim, int64_t offset)
      : p_(p), n_heads_(n_heads), head_dim_(head_dim), offset_(offset) {}

  void run(const CallArgs& a) override {
    const Act &x = a.in[0], &y = a.out[0];
    // Each thread copies its own rows first (one thread copying a 512-token
    // step's 6 MB of queries took most of a prefill call's 0.8 ms).
    a.par->for_range(y.rows, [&](int64_t b, int64_t e, int) {
      if (x.data != y.data) std::memcpy(y.row(b), x.row(b), size_t((e - b) * x.cols) * sizeof(float));
      ref::rope(y.row(b) + offset_, e - b, y.cols, n_heads_, head_dim_, a.step->pos + b, p_);
    });
  }

 private:
  ref::RopeParams p_;
  int64_t n_heads_, head_dim_, offset_;
};

}  // namespace

std::unique_ptr<Kernel> make_cpu_rope(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!b.arity(1, 1, 0)) return nullptr;
  const ref::RopeParams p = read_rope_params(b);
  const int64_t n_heads = b.i("n_heads"), head_dim = b.i("head_dim"), offset = b.i("offset", 0);
  b.in_type(0, GgmlType::F32);
  b.out_cols(0, s.in[0].cols);
  b.check(n_heads > 0 && head_dim > 0 && offset >= 0 && offset + p.n_dims <= head_dim &&
              n_heads * head_dim <= s.in[0].cols,
          "rope over ", n_heads, " heads of ", head_dim, " (offset ", offset, ", ", p.n_dims,
          " dims) does not fit rows of ", s.in[0].cols);
  return b.done(std::make_unique<Rope>(p, n_heads, head_dim, offset));
}

}  // namespace kt::kern
