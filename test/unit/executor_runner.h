// The plan executor as llama_cpp_match.h drives it, shared by the CPU
// (test/unit/plan_e2e_test.cpp) and GPU (test/cuda/cuda_plan_e2e_test.cpp)
// end-to-end tests: one sequence in slot 0, every prompt row's logits, routing
// margins and runner-up swaps through the executor's routing hook.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>
#include <tuple>
#include <vector>

#include "runtime/executor.h"
#include "runtime/sequence.h"
#include "test/unit/llama_cpp_match.h"

namespace kt::test {

class ExecutorRunner final : public LogitsRunner, public kern::RoutingHook {
 public:
  explicit ExecutorRunner(Executor& ex) : ex_(ex), seq_(ex, 0), n_layer_(ex.plan().model()->n_layer()) {
    ex_.set_routing_hook(this);
  }
  ~ExecutorRunner() override { ex_.set_routing_hook(nullptr); }

  int64_t n_vocab() const override { return ex_.n_vocab(); }
  int64_t n_layer() const override { return n_layer_; }

  Result<std::vector<float>> prompt(std::span<const int32_t> tokens) override {
    seq_.truncate(0);
    begin(0, int64_t(tokens.size()));
    std::vector<float> rows(tokens.size() * size_t(n_vocab()));
    auto last = seq_.feed(tokens, [&](int64_t i, std::span<const float> row) {
      std::copy(row.begin(), row.end(), rows.begin() + i * n_vocab());
    });
    if (!last.ok()) return last.error();
    return rows;
  }
  Result<std::vector<float>> step(int32_t token) override {
    begin(seq_.n_past(), 1);
    auto l = seq_.feed(std::span<const int32_t>(&token, 1));
    if (!l.ok()) return l.error();
    return std::vector<float>(l->begin(), l->end());
  }
  std::vector<float> margins() const override { return margins_; }
  void add_routing_swap(int64_t il, int64_t pos, int k) override { swaps_.emplace_back(il, pos, k); }
  void clear_routing_swaps() override { swaps_.clear(); }

  void on_route(kern::RouteEvent& e) override {
    for (int64_t t = 0; t < e.step->n_tokens; ++t) {
      const int64_t pos = e.step->pos[t];
      const size_t at = size_t((pos - pos0_) * n_layer_ + e.layer);
      if (at < margins_.size()) margins_[at] = e.margins[t];
      for (const auto& [il, p, k] : swaps_)
        if (il == e.layer && p == pos) e.take_runner_up(t, k);
    }
  }

 private:
  void begin(int64_t pos0, int64_t n) {
    pos0_ = pos0;
    margins_.assign(size_t(n * n_layer_), INFINITY);
  }

  Executor& ex_;
  Sequence seq_;
  int64_t n_layer_;
  int64_t pos0_ = 0;
  std::vector<float> margins_;
  std::vector<std::tuple<int64_t, int64_t, int>> swaps_;  // (layer, position, k)
};

}  // namespace kt::test
