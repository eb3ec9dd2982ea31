// Rotary position embedding and the cache writers on the GPU:
// cuda.rope, cuda.kv_store, cuda.mla_cache_store.
//
// Rope follows kernels/cpu/ops_ref_rope.cpp operation for operation: the
// angle of pair i is the position multiplied i times by theta_scale in float
// (as ggml's rope cache builds it), YaRN's ramp and blend in float, products
// rounded before sums (__fmul_rn / __fadd_rn). theta_scale, YaRN's correction
// dims and magnitude factor are computed once on the host with the reference's
// own code. Only cosf/sinf differ from the host's libm (by an ulp or two).
#include <cmath>
#include <cstring>

#include "kernels/cpu/ops_ref.h"
#include "kernels/cpu/rope_params.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/cuda_rope.cuh"
#include "kernels/kernel_bind.h"

namespace kt::cuda {

RopeArgs rope_args(const cpu::ref::RopeParams& p) {
  RopeArgs r;
  r.n_dims = p.n_dims;
  r.neox = p.mode == cpu::ref::RopeMode::NeoX;
  r.freq_scale = p.freq_scale;
  r.ext_factor = p.ext_factor;
  r.theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_dims));
  float dims[2];
  cpu::ref::rope_yarn_corr_dims(p.n_dims, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, dims);
  r.corr0 = dims[0];
  r.corr1 = dims[1];
  r.mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) r.mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  return r;
}

namespace {

// Block (t, h): the n_dims / 2 pairs of head h of token t, from x into y. Out
// of place (x != y), the block also copies the head's other values, and block
// (t, 0) the row's values past the last head: one kernel where a copy of the
// rows and a kernel in place were two (a memory copy in a recorded step is a
// node of its own, and no kernel after it starts early).
__device__ __forceinline__ void rope_block(const float* x, float* y, int64_t cols, int64_t n_heads, int64_t head_dim,
                                           int64_t offset, const int32_t* __restrict__ pos, const RopeArgs& r,
                                           int64_t t, int64_t h) {
  const float* src = x + t * cols + h * head_dim;
  float* dst = y + t * cols + h * head_dim;
  if (x != y) {
    for (int64_t c = threadIdx.x; c < head_dim; c += blockDim.x)
      if (c < offset || c >= offset + r.n_dims) dst[c] = src[c];
    if (h == 0)
      for (int64_t c = n_heads * head_dim + threadIdx.x; c < cols; c += blockDim.x) y[t * cols + c] = x[t * cols + c];
  }
  for (int i = threadIdx.x; i < r.n_dims / 2; i += blockDim.x) rope_pair(r, pos[t], i, src + offset, dst + offset);
}

__global__ void rope_kernel(const float* x, float* y, int64_t cols, int64_t n_heads, int64_t head_dim,
                            int64_t offset, const int32_t* __restrict__ pos, RopeArgs r) {
  wait_for_inputs();
  rope_block(x, y, cols, n_heads, head_dim, offset, pos, r, blockIdx.x, blockIdx.y);
}

template <class E>
__global__ void kv_store_kernel(const float* __restrict__ k, const float* __restrict__ v, int64_t k_cols,
                                int64_t v_cols, const int32_t* __restrict__ slot, const int32_t* __restrict__ pos,
                                int64_t n_ctx, E* __restrict__ kc, E* __restrict__ vc) {
  wait_for_inputs();
  const int64_t t = blockIdx.x;
  const int64_t row = int64_t(slot[t]) * n_ctx + pos[t];
  for (int64_t c = threadIdx.x; c < k_cols; c += blockDim.x) store_as(kc + row * k_cols + c, k[t * k_cols + c]);
  for (int64_t c = threadIdx.x; c < v_cols; c += blockDim.x) store_as(vc + row * v_cols + c, v[t * v_cols + c]);
}

template <class E>
__global__ void __launch_bounds__(kStoreThreads)
    mla_store_kernel(const __grid_constant__ MlaStore<E> a, const int32_t* __restrict__ slot,
                     const int32_t* __restrict__ pos) {
  wait_for_inputs();
  mla_store_block(a, slot, pos, blockIdx.x);
}

// cuda.rope_mla_store: blocks (t, h < n_heads) rope q's heads as rope_kernel,
// blocks (t, n_heads) store kv's row as mla_store_kernel. One launch where the
// two calls took two: q's rope and the cache store read different rows and
// neither reads what the other writes.
template <class E>
__global__ void __launch_bounds__(kStoreThreads)
    rope_mla_store_kernel(const float* q, float* qr, int64_t q_cols, int64_t n_heads, int64_t head_dim, int64_t offset,
                          RopeArgs r, const __grid_constant__ MlaStore<E> a, const int32_t* __restrict__ slot,
                          const int32_t* __restrict__ pos) {
  wait_for_inputs();
  if (blockIdx.y < n_heads)
    rope_block(q, qr, q_cols, n_heads, head_dim, offset, pos, r, blockIdx.x, blockIdx.y);
  else
    mla_store_block(a, slot, pos, blockIdx.x);
}

}  // namespace

template <class E>
void launch_rope_mla_store(const float* q, float* qr, int64_t rows, int64_t q_cols, int64_t n_heads, int64_t head_dim,
                           int64_t offset, const RopeArgs& r, const MlaStore<E>& a, const int32_t* slot,
                           const int32_t* pos, cudaStream_t s) {
  launch(rope_mla_store_kernel<E>, dim3(unsigned(rows), unsigned(n_heads + 1)), kStoreThreads, size_t(a.dr) * 4, s, q,
         qr, q_cols, n_heads, head_dim, offset, r, a, slot, pos);
}
template void launch_rope_mla_store<float>(const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                           const RopeArgs&, const MlaStore<float>&, const int32_t*, const int32_t*,
                                           cudaStream_t);
template void launch_rope_mla_store<__half>(const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                            const RopeArgs&, const MlaStore<__half>&, const int32_t*, const int32_t*,
                                            cudaStream_t);
template void launch_rope_mla_store<__nv_bfloat16>(const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                   const RopeArgs&, const MlaStore<__nv_bfloat16>&, const int32_t*,
                                                   const int32_t*, cudaStream_t);

}  // namespace kt::cuda

namespace kt::kern {

namespace {

class Rope final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  Rope(int device, cuda::RopeArgs r, int64_t n_heads, int64_t head_dim, int64_t offset)
      : device_(device), r_(r), n_heads_(n_heads), head_dim_(head_dim), offset_(offset) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act &x = a.in[0], &y = a.out[0];
    if (y.rows == 0) return;
    auto s = static_cast<cudaStream_t>(a.queue);
    const cuda::DeviceStep st = cuda::upload_step(*a.step, a.queue);
    const int threads = std::min(128, std::max(32, r_.n_dims / 2));
    cuda::launch(cuda::rope_kernel, dim3(unsigned(y.rows), unsigned(n_heads_)), threads, 0, s, x.f32(), y.f32(),
                 y.cols, n_heads_, head_dim_, offset_, st.pos, r_);
    cuda::check_launch("cuda.rope", a.queue);
  }

 private:
  int device_;
  cuda::RopeArgs r_;
  int64_t n_heads_, head_dim_, offset_;
};

class KvStore final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  explicit KvStore(int device) : device_(device) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const KvView& kv = *a.kv;
    const Act &k = a.in[0], &v = a.in[1];
    if (k.rows == 0) return;
    const cuda::DeviceStep st = cuda::upload_step(*a.step, a.queue);
    cuda::with_cache_type(kv.type, [&](auto ec) {
      using E = decltype(ec);
      cuda::launch(cuda::kv_store_kernel<E>, unsigned(k.rows), 256, 0, static_cast<cudaStream_t>(a.queue), k.f32(),
                   v.f32(), kv.k_cols, kv.v_cols, st.slot, st.pos, kv.n_ctx, static_cast<E*>(kv.k),
                   static_cast<E*>(kv.v));
    });
    cuda::check_launch("cuda.kv_store", a.queue);
  }

 private:
  int device_;
};

class MlaCacheStore final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  MlaCacheStore(int device, float eps, cuda::RopeArgs r) : device_(device), eps_(eps), r_(r) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const KvView& kv = *a.kv;
    const Act& x = a.in[0];
    if (x.rows == 0) return;
    const cuda::DeviceStep st = cuda::upload_step(*a.step, a.queue);
    cuda::with_cache_type(kv.type, [&](auto ec) {
      using E = decltype(ec);
      cuda::launch(cuda::mla_store_kernel<E>, unsigned(x.rows), cuda::kStoreThreads, size_t(kv.v_cols) * 4,
                   static_cast<cudaStream_t>(a.queue), store_args<E>(a, 0, eps_, r_), st.slot, st.pos);
    });
    cuda::check_launch("cuda.mla_cache_store", a.queue);
  }

  // The store of input k's rows into the call's latent cache.
  template <class E>
  static cuda::MlaStore<E> store_args(const CallArgs& a, size_t k, float eps, const cuda::RopeArgs& r) {
    return cuda::mla_store_args<E>(a.in[k].f32(), a.in[k].cols, *a.kv, a.weights[0].f32(), eps, r);
  }

 private:
  int device_;
  float eps_;
  cuda::RopeArgs r_;
};

// cuda.rope_mla_store [q, kv_a] -> [q roped], weights [kv_a_norm], the
// latent cache: cuda.rope of q then cuda.mla_cache_store of kv_a (kt-fuse-calls
// joins them: adjacent in every MLA layer, one rope), in one launch.
class RopeMlaStore final : public Kernel {
 public:
  bool capturable(const CallArgs&) const override { return true; }
  RopeMlaStore(int device, float eps, cuda::RopeArgs r, int64_t n_heads, int64_t head_dim, int64_t offset)
      : device_(device), eps_(eps), r_(r), n_heads_(n_heads), head_dim_(head_dim), offset_(offset) {}
  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    const Act &q = a.in[0], &y = a.out[0];
    if (q.rows == 0) return;
    const KvView& kv = *a.kv;
    const cuda::DeviceStep st = cuda::upload_step(*a.step, a.queue);
    cuda::with_cache_type(kv.type, [&](auto ec) {
      using E = decltype(ec);
      cuda::launch_rope_mla_store<E>(q.f32(), y.f32(), q.rows, y.cols, n_heads_, head_dim_, offset_, r_,
                                     MlaCacheStore::store_args<E>(a, 1, eps_, r_), st.slot, st.pos,
                                     static_cast<cudaStream_t>(a.queue));
    });
    cuda::check_launch("cuda.rope_mla_store", a.queue);
  }

 private:
  int device_;
  float eps_;
  cuda::RopeArgs r_;
  int64_t n_heads_, head_dim_, offset_;
};

bool on_gpu(Binder& b) { return b.check(b.spec().device >= 0, "a CUDA kernel needs a GPU device"); }

// The heads cuda.rope (and cuda.rope_mla_store's q) turns: checked against input 0.
struct RopeHeads {
  int64_t n_heads, head_dim, offset;
};
RopeHeads bind_rope_heads(Binder& b, const CallSpec& s, const cpu::ref::RopeParams& p) {
  const RopeHeads h{b.i("n_heads"), b.i("head_dim"), b.i("offset", 0)};
  b.in_type(0, GgmlType::F32);
  b.out_cols(0, s.in[0].cols);
  b.check(h.n_heads > 0 && h.head_dim > 0 && h.offset >= 0 && h.offset + p.n_dims <= h.head_dim &&
              h.n_heads * h.head_dim <= s.in[0].cols,
          "rope over ", h.n_heads, " heads of ", h.head_dim, " (offset ", h.offset, ", ", p.n_dims,
          " dims) does not fit rows of ", s.in[0].cols);
  b.check(h.n_heads <= 65534, "rope over more than 65534 heads");
  return h;
}

}  // namespace

void bind_mla_store(Binder& b, const CallSpec& s, size_t k, size_t w, const cpu::ref::RopeParams& rope) {
  b.check(s.kv->kind == KvView::Kind::MlaLatent, "the KV cache is not a latent cache");
  b.check(rope.n_dims == s.kv->v_cols, "rope n_dims ", rope.n_dims, " differs from the cache's ", s.kv->v_cols,
          " rope dims");
  b.in_cols(k, s.kv->k_cols + s.kv->v_cols);
  b.in_type(k, GgmlType::F32);
  b.check(s.weights[w].type == GgmlType::F32, "weight '", std::string(s.weights[w].name), "' must be F32");
  b.weight_shape(w, s.kv->k_cols);
}

std::unique_ptr<Kernel> make_cuda_rope(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!on_gpu(b) || !b.arity(1, 1, 0)) return nullptr;
  const cpu::ref::RopeParams p = read_rope_params(b);
  const RopeHeads h = bind_rope_heads(b, s, p);
  if (!b.ok()) return nullptr;
  return std::make_unique<Rope>(s.device, cuda::rope_args(p), h.n_heads, h.head_dim, h.offset);
}

std::unique_ptr<Kernel> make_cuda_rope_mla_store(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!on_gpu(b) || !b.arity(2, 1, 1) || !b.needs_kv()) return nullptr;
  const double eps = b.f("eps");
  const cpu::ref::RopeParams p = read_rope_params(b);
  if (!b.ok()) return nullptr;
  const RopeHeads h = bind_rope_heads(b, s, p);
  bind_mla_store(b, s, 1, 0, p);
  if (!b.ok()) return nullptr;
  return std::make_unique<RopeMlaStore>(s.device, float(eps), cuda::rope_args(p), h.n_heads, h.head_dim, h.offset);
}

std::unique_ptr<Kernel> make_cuda_kv_store(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (on_gpu(b) && b.arity(2, 0, 0) && b.needs_kv()) {
    b.check(s.kv->kind == KvView::Kind::Kv, "the KV cache is not a key/value cache");
    b.in_cols(0, s.kv->k_cols);
    b.in_cols(1, s.kv->v_cols);
    b.in_type(0, GgmlType::F32);
    b.in_type(1, GgmlType::F32);
  }
  return b.done(std::make_unique<KvStore>(s.device));
}

std::unique_ptr<Kernel> make_cuda_mla_cache_store(const CallSpec& s, std::string* error) {
  Binder b(s, error);
  if (!on_gpu(b) || !b.arity(1, 0, 1) || !b.needs_kv()) return nullptr;
  const double eps = b.f("eps");
  const cpu::ref::RopeParams rope = read_rope_params(b);
  if (!b.ok()) return nullptr;
  bind_mla_store(b, s, 0, 0, rope);
  return b.done(std::make_unique<MlaCacheStore>(s.device, float(eps), cuda::rope_args(rope)));
}

}  // namespace kt::kern
