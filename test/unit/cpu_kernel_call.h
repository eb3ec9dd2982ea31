// What the CPU kernel tests share (cpu_kernels_test.cpp, cpu_moe_kernels_test.cpp,
// cpu_mla_kernels_test.cpp): a plan call bound as the executor binds it, random
// weights of any type and random floats (never zeros), a one-sequence step, and
// the relative L2 distance the tolerances are stated in.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/random_blocks.h"
#include "kernels/registry.h"
#include "runtime/thread_pool.h"

namespace kt::kern::cpu_test {

inline ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

// An encoded tensor with random valid blocks.
struct Tensor {
  std::vector<uint8_t> bytes;
  WeightView view;
};

inline Tensor random_weight(GgmlType t, std::vector<int64_t> shape, uint64_t seed, const char* name) {
  Tensor w;
  const TypeTraits& tt = type_traits(t);
  int64_t rows = 1;
  for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
  w.bytes.resize(size_t(tt.row_bytes(shape[0]) * uint64_t(rows)));
  SplitMix64 rng(seed);
  fill_random_blocks(t, w.bytes.data(), w.bytes.size(), rng, 0.0f, 0.5f);
  w.view.data = w.view.host = w.bytes.data();
  w.view.type = t;
  w.view.name = name;
  for (size_t d = 0; d < 4; ++d) w.view.ne[d] = d < shape.size() ? shape[d] : 1;
  w.view.set_packed_strides();
  return w;
}

inline std::vector<float> random_floats(size_t n, uint64_t seed, float spread = 1.0f) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = spread * (2.0f * rng.uniform() - 1.0f);
  return v;
}

inline double rel_l2(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// One call: its spec, buffers (poisoned outputs) and a run.
struct Call {
  CallSpec spec;
  std::vector<std::vector<float>> in, out;  // I32 buffers are stored in float-sized slots
  std::unique_ptr<Kernel> kernel;
  std::string error;

  Call(const char* name, Impl impl, Rounding rounding) {
    spec.kernel = name;
    spec.impl = impl;
    spec.rounding = rounding;
  }
  void add_in(GgmlType t, int64_t cols, int64_t rows, std::vector<float> data) {
    spec.in.push_back({t, cols, rows});
    in.push_back(std::move(data));
  }
  void add_out(GgmlType t, int64_t cols, int64_t rows) {
    spec.out.push_back({t, cols, rows});
    out.emplace_back(size_t(cols * rows), std::nanf(""));
  }
  bool bind() {
    kernel = find_kernel(spec.kernel)->make(spec, &error);
    return kernel != nullptr;
  }
  void run(const Step& step, int64_t rows) {
    std::vector<Act> ia, oa;
    for (size_t k = 0; k < in.size(); ++k)
      ia.push_back(Act{in[k].data(), spec.in[k].type, spec.in[k].cols, rows, spec.in[k].max_rows});
    for (size_t k = 0; k < out.size(); ++k)
      oa.push_back(Act{out[k].data(), spec.out[k].type, spec.out[k].cols, rows, spec.out[k].max_rows});
    CallArgs a;
    a.in = ia;
    a.out = oa;
    a.weights = spec.weights;
    a.kv = spec.kv;
    a.step = &step;
    a.par = &pool();
    kernel->run(a);
  }
};

struct StepData {
  std::vector<int32_t> tokens, pos, slot, outputs;
  Step step() const {
    return Step{int64_t(pos.size()), tokens.data(), pos.data(), slot.data(), int64_t(outputs.size()), outputs.data()};
  }
};

inline StepData one_sequence(int64_t n, int32_t pos0 = 0) {
  StepData s;
  for (int64_t t = 0; t < n; ++t) {
    s.tokens.push_back(1);
    s.pos.push_back(pos0 + int32_t(t));
    s.slot.push_back(0);
    s.outputs.push_back(int32_t(t));
  }
  return s;
}


}  // namespace kt::kern::cpu_test
