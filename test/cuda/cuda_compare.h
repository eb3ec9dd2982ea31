// What the CUDA kernel tests share: run a Call on the GPU and on its CPU
// reference kernel ("cpu." bound with Impl::Reference), check every output
// (finite, relative L2 within a tolerance), and print the worst error seen
// per kernel when the binary ends.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "test/cuda/cuda_test_util.h"

namespace kt::test {
namespace {

using kern::Rounding;

// Worst relative L2 per kernel (and rounding), printed at the end.
std::map<std::string, double>& worst() {
  static std::map<std::string, double> w;
  return w;
}

class WorstErrors : public testing::Environment {
 public:
  void TearDown() override {
    if (worst().empty()) return;
    std::printf("\n== worst relative L2 (GPU vs CPU reference) per kernel ==\n");
    for (const auto& [k, v] : worst()) std::printf("  %-44s %.3e\n", k.c_str(), v);
  }
};
const auto* const g_env = testing::AddGlobalTestEnvironment(new WorstErrors);

std::string rname(Rounding r) { return r == Rounding::GgmlCpu ? "ggml" : "exact"; }

void note(const std::string& key, double e) {
  double& w = worst()[key];
  w = std::max(w, e);
}

// Runs both, checks every output (finite, rel L2 <= tol), records the error.
void compare(const Call& c, double tol, const std::string& what, const std::string& key = "") {
  const Outcome cpu = run_cpu(c);
  ASSERT_TRUE(cpu.error.empty()) << what << ": cpu: " << cpu.error;
  const Outcome gpu = run_gpu(c);
  ASSERT_TRUE(gpu.error.empty()) << what << ": gpu: " << gpu.error;
  for (size_t i = 0; i < c.out.size(); ++i) {
    if (c.out[i].type == GgmlType::I32) {
      EXPECT_EQ(gpu.out[i].ints(), cpu.out[i].ints()) << what << ": output " << i;
      continue;
    }
    const auto g = gpu.out[i].floats(), w = cpu.out[i].floats();
    ASSERT_TRUE(all_finite(w)) << what << ": the reference wrote non-finite values";
    ASSERT_TRUE(all_finite(g)) << what << ": output " << i << " has unwritten (NaN) or non-finite values";
    const double e = rel_l2(g, w);
    note((key.empty() ? c.op : key) + " (" + rname(c.rounding) + ")", e);
    EXPECT_LE(e, tol) << what << ": output " << i << " rel L2 " << e << ", max abs " << max_abs(g, w);
  }
}

}  // namespace
}  // namespace kt::test
