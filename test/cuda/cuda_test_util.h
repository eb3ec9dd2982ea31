// Running one plan call through a "cpu." kernel (the reference implementation)
// and its "cuda." namesake on the same random inputs, and comparing. Outputs
// are poisoned (NaN, -1) before each run, so an unwritten element fails. The
// GPU side gets device copies of everything (activations, weights with their
// host bytes beside, the KV cache) and runs on one stream.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_rounded_rows.h"
#include "kernels/kernel.h"
#include "kernels/random_blocks.h"
#include "kernels/registry.h"
#include "runtime/thread_pool.h"

namespace kt::test {

inline bool have_gpu() {
  static const bool yes = [] {
    int n = 0;
    const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError();
    return ok;
  }();
  return yes;
}

#define KT_REQUIRE_GPU() \
  if (!::kt::test::have_gpu()) GTEST_SKIP() << "no CUDA device"

#define KT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

inline ThreadPool& pool() {
  static ThreadPool p(4);
  return p;
}

// Uniform values in [lo, hi), never all zero.
inline std::vector<float> random_floats(size_t n, SplitMix64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

inline double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double max_abs(const std::vector<float>& got, const std::vector<float>& want) {
  double m = 0;
  for (size_t i = 0; i < want.size(); ++i) m = std::max(m, std::fabs(double(got[i]) - double(want[i])));
  return m;
}

inline bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// One activation buffer: max_rows rows, `rows` of them used by the step.
struct Buf {
  GgmlType type = GgmlType::F32;
  int64_t cols = 0, rows = 0, max_rows = 0;
  std::vector<uint8_t> bytes;  // host content, max_rows * cols elements

  static Buf f32(int64_t cols, int64_t rows, std::vector<float> v = {}, int64_t max_rows = 0) {
    Buf b;
    b.cols = cols;
    b.rows = rows;
    b.max_rows = std::max(max_rows, rows);
    b.bytes.assign(size_t(b.max_rows * cols) * 4, 0);
    if (!v.empty()) std::memcpy(b.bytes.data(), v.data(), std::min(v.size() * 4, b.bytes.size()));
    return b;
  }
  static Buf i32(int64_t cols, int64_t rows, const std::vector<int32_t>& v = {}) {
    Buf b;
    b.type = GgmlType::I32;
    b.cols = cols;
    b.rows = rows;
    b.max_rows = rows;
    b.bytes.assign(size_t(rows * cols) * 4, 0);
    if (!v.empty()) std::memcpy(b.bytes.data(), v.data(), std::min(v.size() * 4, b.bytes.size()));
    return b;
  }
  size_t elems() const { return size_t(max_rows * cols); }
  std::vector<float> floats(int64_t n_rows = -1) const {
    const size_t n = size_t((n_rows < 0 ? rows : n_rows) * cols);
    std::vector<float> v(n);
    std::memcpy(v.data(), bytes.data(), n * 4);
    return v;
  }
  std::vector<int32_t> ints() const {
    std::vector<int32_t> v(size_t(rows * cols));
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
  }
};

struct Weight {
  std::string name;
  GgmlType type = GgmlType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  std::vector<uint8_t> bytes;

  static Weight random(const std::string& name, GgmlType t, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1,
                       uint64_t seed = 1, float center = 0.0f, float spread = 0.5f) {
    Weight w;
    w.name = name;
    w.type = t;
    w.ne[0] = ne0, w.ne[1] = ne1, w.ne[2] = ne2;
    const TypeTraits& tt = type_traits(t);
    w.bytes.resize(tt.row_bytes(ne0) * size_t(ne1 * ne2));
    SplitMix64 rng(seed);
    fill_random_blocks(t, w.bytes.data(), w.bytes.size(), rng, center, spread);
    return w;
  }
  static Weight f32(const std::string& name, const std::vector<float>& v, int64_t ne0, int64_t ne1 = 1) {
    Weight w;
    w.name = name;
    w.ne[0] = ne0, w.ne[1] = ne1;
    w.bytes.resize(v.size() * 4);
    std::memcpy(w.bytes.data(), v.data(), w.bytes.size());
    return w;
  }
  kern::WeightView view(const void* data) const {
    kern::WeightView v;
    v.data = data;
    v.host = bytes.data();
    v.type = type;
    v.name = name;
    for (int d = 0; d < 4; ++d) v.ne[d] = ne[d];
    v.set_packed_strides();
    return v;
  }
};

// The KV cache of one layer: shape and host content.
struct Kv {
  kern::KvView shape;  // k, v unused
  std::vector<uint8_t> k, v;
};

inline Kv random_kv(kern::KvView::Kind kind, GgmlType type, int64_t n_slots, int64_t n_ctx, int64_t n_kv_heads,
                    int64_t k_cols, int64_t v_cols, uint64_t seed) {
  Kv kv;
  kv.shape.kind = kind;
  kv.shape.type = type;
  kv.shape.n_slots = n_slots;
  kv.shape.n_ctx = n_ctx;
  kv.shape.n_kv_heads = n_kv_heads;
  kv.shape.k_cols = k_cols;
  kv.shape.v_cols = v_cols;
  const size_t es = type_traits(type).type_size;
  kv.k.resize(size_t(n_slots * n_ctx * k_cols) * es);
  kv.v.resize(size_t(n_slots * n_ctx * v_cols) * es);
  SplitMix64 rng(seed);
  fill_random_blocks(type, kv.k.data(), kv.k.size(), rng, 0.0f, 1.0f);
  fill_random_blocks(type, kv.v.data(), kv.v.size(), rng, 0.0f, 1.0f);
  return kv;
}

struct StepData {
  std::vector<int32_t> tokens, pos, slot, outputs;
  kern::Step view() const {
    kern::Step s;
    s.n_tokens = int64_t(pos.size());
    s.tokens = tokens.empty() ? nullptr : tokens.data();
    s.pos = pos.data();
    s.slot = slot.data();
    s.n_outputs = int64_t(outputs.size());
    s.outputs = outputs.data();
    return s;
  }
  // A run of n tokens of one sequence from pos0, appended.
  void add_run(int32_t slot_id, int32_t pos0, int32_t n) {
    for (int32_t i = 0; i < n; ++i) {
      pos.push_back(pos0 + i);
      slot.push_back(slot_id);
    }
  }
};

// A call: its kernel (without "cpu."/"cuda."), operands, params, step.
struct Call {
  std::string op;
  std::vector<Buf> in, out;
  std::vector<Weight> weights;
  std::vector<kern::Param> params;
  std::unique_ptr<Kv> kv;
  StepData step;
  kern::Rounding rounding = kern::Rounding::GgmlCpu;
  kern::RoutingHook* hook = nullptr;
  // The GPU kernel reads the weights in host memory (streamed experts).
  bool weights_on_host = false;

  void param(const std::string& key, int64_t i) {
    kern::Param p;
    p.key = key;
    p.i = i;
    p.f = double(i);
    params.push_back(p);
  }
  void paramf(const std::string& key, double f) {
    kern::Param p;
    p.key = key;
    p.f = f;
    params.push_back(p);
  }
};

// What a run produced: the outputs and the KV cache after it.
// A rope's params (cuda.rope, the caches' stores): n_dims of head_dim from
// offset, base 10000, YaRN (V2's factor 40) if yarn; n_heads left out if < 0
// (a call whose other params name it).
inline void rope_params(Call& c, int n_dims, int mode, bool yarn, int n_heads, int head_dim, int offset) {
  c.param("n_dims", n_dims);
  c.param("mode", mode);
  c.paramf("freq_base", 10000.0);
  if (n_heads >= 0) c.param("n_heads", n_heads);
  c.param("head_dim", head_dim);
  c.param("offset", offset);
  if (yarn) {
    c.paramf("freq_scale", 0.025);
    c.param("n_ctx_orig", 4096);
    c.paramf("ext_factor", 1.0);
    c.paramf("attn_factor", 0.7305);
    c.paramf("beta_fast", 32.0);
    c.paramf("beta_slow", 1.0);
  }
}

struct Outcome {
  std::vector<Buf> out;
  std::vector<uint8_t> k, v;
  std::string error;  // bind failure
};

inline kern::CallSpec spec_of(const Call& c, const std::string& kernel, std::vector<kern::WeightView> weights,
                              const kern::KvView* kv, int device) {
  kern::CallSpec s;
  s.kernel = kernel;
  s.path = "test";
  s.layer = 0;
  for (const Buf& b : c.in) s.in.push_back({b.type, b.cols, b.max_rows});
  for (const Buf& b : c.out) s.out.push_back({b.type, b.cols, b.max_rows});
  s.weights = std::move(weights);
  s.params = c.params;
  s.kv = kv;
  s.rounding = c.rounding;
  s.impl = kern::Impl::Reference;
  s.device = device;
  return s;
}

inline void poison(Buf& b) {
  if (b.type == GgmlType::I32)
    std::memset(b.bytes.data(), 0xFF, b.bytes.size());  // -1
  else
    for (size_t i = 0; i < b.elems(); ++i) reinterpret_cast<float*>(b.bytes.data())[i] = NAN;
}

inline Outcome run_cpu(const Call& c) {
  Outcome o;
  const std::string name = "cpu." + c.op;
  const kern::KernelEntry* e = kern::find_kernel(name);
  if (!e) {
    o.error = name + " is not registered";
    return o;
  }
  std::vector<kern::WeightView> wv;
  for (const Weight& w : c.weights) wv.push_back(w.view(w.bytes.data()));
  o.k = c.kv ? c.kv->k : std::vector<uint8_t>();
  o.v = c.kv ? c.kv->v : std::vector<uint8_t>();
  kern::KvView kv;
  if (c.kv) {
    kv = c.kv->shape;
    kv.k = o.k.data();
    kv.v = o.v.data();
  }
  const kern::CallSpec spec = spec_of(c, name, wv, c.kv ? &kv : nullptr, -1);
  std::unique_ptr<kern::Kernel> k = e->make(spec, &o.error);
  if (!k) return o;
  std::vector<Buf> in = c.in;
  o.out = c.out;
  for (Buf& b : o.out) poison(b);
  std::vector<kern::Act> ia, oa;
  for (Buf& b : in) ia.push_back({b.bytes.data(), b.type, b.cols, b.rows, b.max_rows});
  for (Buf& b : o.out) oa.push_back({b.bytes.data(), b.type, b.cols, b.rows, b.max_rows});
  const kern::Step st = c.step.view();
  kern::CallArgs a;
  a.in = ia;
  a.out = oa;
  a.weights = wv;
  a.kv = c.kv ? &kv : nullptr;
  a.step = &st;
  a.par = &pool();
  a.routing = c.hook;
  a.layer = 0;
  k->run(a);
  return o;
}

// Device memory freed at scope end.
struct DevMem {
  std::vector<void*> ptrs;
  ~DevMem() {
    for (void* p : ptrs) cudaFree(p);
  }
  void* put(const void* host, size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 16)) != cudaSuccess) return nullptr;
    ptrs.push_back(p);
    if (host) cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
    return p;
  }
};

// recorded: the call's work recorded on a queue of its own (as the executor
// records a step: cuda graphs, thread-local capture) and the recording
// launched twice, rather than run once on `stream`.
inline Outcome run_gpu(const Call& c, cudaStream_t stream = nullptr, bool recorded = false) {
  Outcome o;
  const std::string name = "cuda." + c.op;
  const kern::KernelEntry* e = kern::find_kernel(name);
  if (!e) {
    o.error = name + " is not registered";
    return o;
  }
  DevMem mem;
  std::vector<kern::WeightView> wv;
  for (const Weight& w : c.weights)
    wv.push_back(c.weights_on_host ? w.view(w.bytes.data()) : w.view(mem.put(w.bytes.data(), w.bytes.size())));
  kern::KvView kv;
  if (c.kv) {
    kv = c.kv->shape;
    kv.k = mem.put(c.kv->k.data(), c.kv->k.size());
    kv.v = mem.put(c.kv->v.data(), c.kv->v.size());
  }
  const kern::CallSpec spec = spec_of(c, name, wv, c.kv ? &kv : nullptr, 0);
  std::unique_ptr<kern::Kernel> k = e->make(spec, &o.error);
  if (!k) return o;
  o.out = c.out;
  for (Buf& b : o.out) poison(b);
  std::vector<kern::Act> ia, oa;
  for (const Buf& b : c.in) ia.push_back({mem.put(b.bytes.data(), b.bytes.size()), b.type, b.cols, b.rows, b.max_rows});
  for (const Buf& b : o.out) oa.push_back({mem.put(b.bytes.data(), b.bytes.size()), b.type, b.cols, b.rows, b.max_rows});
  const kern::Step st = c.step.view();
  kern::CallArgs a;
  a.in = ia;
  a.out = oa;
  a.weights = wv;
  a.kv = c.kv ? &kv : nullptr;
  a.step = &st;
  a.routing = c.hook;
  a.layer = 0;
  a.queue = stream;
  if (recorded) {
    cudaStream_t s = nullptr;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    // The step's indices on the device first, as the executor's prepare_step
    // does before it records (their first copy to a queue allocates).
    if (e == cudaSuccess) {
      cuda::upload_step(st, s);
      e = cudaStreamSynchronize(s);
    }
    if (e == cudaSuccess) e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    a.queue = s;
    if (e == cudaSuccess) k->run(a);
    if (e == cudaSuccess) e = cudaStreamEndCapture(s, &g);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&ge, g, 0);
    for (int i = 0; i < 2 && e == cudaSuccess; ++i) e = cudaGraphLaunch(ge, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    if (s) cudaStreamDestroy(s);
    if (e != cudaSuccess) {
      o.error = std::string("recording the call: ") + cudaGetErrorString(e);
      cudaGetLastError();
      return o;
    }
  } else {
    k->run(a);
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess) {
    o.error = std::string("cuda error after the run: ") + cudaGetErrorString(cudaGetLastError());
    return o;
  }
  for (size_t i = 0; i < o.out.size(); ++i)
    cudaMemcpy(o.out[i].bytes.data(), oa[i].data, o.out[i].bytes.size(), cudaMemcpyDeviceToHost);
  if (c.kv) {
    o.k.resize(c.kv->k.size());
    o.v.resize(c.kv->v.size());
    cudaMemcpy(o.k.data(), kv.k, o.k.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(o.v.data(), kv.v, o.v.size(), cudaMemcpyDeviceToHost);
  }
  return o;
}

// add_rms_norm over random rows: a residual, a smaller addend, a weight near 1;
// round_act (32 or 256): also its rows rounded to 8-bit blocks of that many
// values (the third output kt-fuse-calls gives a norm its int8 products read).
inline Call add_rms_norm_call(int64_t cols, int64_t rows, SplitMix64& rng, int round_act = 0) {
  Call c;
  c.op = "add_rms_norm";
  c.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng, -3, 3)));
  c.in.push_back(Buf::f32(cols, rows, random_floats(size_t(cols * rows), rng, -1, 1)));
  c.out.push_back(Buf::f32(cols, rows));
  c.out.push_back(Buf::f32(cols, rows));
  c.weights.push_back(Weight::f32("norm", random_floats(size_t(cols), rng, 0.5f, 1.5f), cols));
  c.paramf("eps", 1e-6);
  if (round_act) {
    c.out.push_back(Buf::i32(cuda::rounded_rows_cols(cols, round_act), rows));
    c.param("round_act", round_act);
  }
  return c;
}

// A cache's bytes as floats.
inline std::vector<float> cache_floats(GgmlType t, const std::vector<uint8_t>& bytes) {
  const size_t n = bytes.size() / type_traits(t).type_size;
  std::vector<float> v(n);
  type_traits(t).dequant_row(bytes.data(), v.data(), int64_t(n));
  return v;
}

}  // namespace kt::test
