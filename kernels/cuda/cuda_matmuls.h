// The contract of cuda.matmuls (kernels/cuda/cuda_matmuls.cu) that
// kt-fuse-calls, which makes those calls, shares with the kernel: no CUDA here.
#pragma once

namespace kt::cuda {

// Matrices one cuda.matmuls call multiplies its input by, at most.
constexpr int kMaxSiblings = 4;

}  // namespace kt::cuda
