// GPU dequantization against llama.cpp's quant vectors: bit-exact, like the CPU
// reference. Runs on the device machine; skips where there is no GPU (CI).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/dequant_cuda.h"
#include "runtime/gguf.h"

namespace kt {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::vector<float> gpu_dequant(GgmlType t, const uint8_t* src, uint64_t nbytes, int64_t n) {
  void* d_src = nullptr;
  float* d_dst = nullptr;
  EXPECT_EQ(cudaMalloc(&d_src, nbytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&d_dst, size_t(n) * 4), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d_src, src, nbytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cuda::dequant_rows(t, d_src, d_dst, n, nullptr), 0);
  std::vector<float> out(static_cast<size_t>(n));
  EXPECT_EQ(cudaMemcpy(out.data(), d_dst, size_t(n) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_src);
  cudaFree(d_dst);
  return out;
}

TEST(CudaDequant, MatchesLlamaCppQuantVectorsBitForBit) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto f = GgufFile::open(std::string(KT_TEST_DATA_DIR) + "/quant-vectors.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  int checked = 0;
  for (const GgufTensor& q : f->tensors()) {
    if (!q.name.ends_with(".quant") || !cuda::dequant_supported(q.type)) continue;
    const std::string tname = q.name.substr(0, q.name.size() - 6);
    const GgufTensor* want = f->tensor(tname + ".dequant");
    ASSERT_NE(want, nullptr) << tname;
    const auto got = gpu_dequant(q.type, q.data, q.nbytes, q.nelements());
    ASSERT_EQ(std::memcmp(got.data(), want->data, got.size() * 4), 0) << tname << " differs from llama.cpp";
    ++checked;
  }
  EXPECT_EQ(checked, 7) << "Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K and IQ4_XS are in the vectors";
}

// Float types and random blocks against the CPU reference (never all zeros).
TEST(CudaDequant, MatchesCpuReferenceOnRandomBlocks) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(7);
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    const TypeTraits& tt = type_traits(t);
    const int64_t n = tt.block_size * 37;
    std::vector<uint8_t> bytes(tt.row_bytes(n));
    for (auto& b : bytes) b = uint8_t(rng());
    // Keep every fp16 scale finite: clear the exponent's top bit of each half.
    if (t == GgmlType::F16 || t == GgmlType::BF16) {
      for (size_t i = 1; i < bytes.size(); i += 2) bytes[i] &= 0x3f;
    } else {
      for (size_t b = 0; b < bytes.size(); b += tt.type_size) {
        const size_t d = (t == GgmlType::Q6_K) ? 208 : 0;
        bytes[b + d + 1] &= 0x3f;
        if (t == GgmlType::Q4_K || t == GgmlType::Q5_K) bytes[b + 3] &= 0x3f;
      }
    }
    std::vector<float> want(static_cast<size_t>(n));
    tt.dequant_row(bytes.data(), want.data(), n);
    const auto got = gpu_dequant(t, bytes.data(), bytes.size(), n);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << tt.name;
  }
}

}  // namespace
}  // namespace kt
