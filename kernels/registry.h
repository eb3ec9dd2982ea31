// The one kernel registry: kernel names as plans write them ("cpu.matmul")
// to the factories that bind them (kernels/kernel.h). A plan naming a kernel
// this build lacks fails at load with the name; the runtime never switches on
// kernel names itself. The table is assembled from each backend's own table
// (kernels/cpu/cpu_kernels.h, and kernels/cuda/ when CUDA is built).
#pragma once

#include <span>
#include <string_view>

#include "kernels/kernel.h"

namespace kt::kern {

struct KernelEntry {
  std::string_view name;     // "cpu.matmul"
  KernelFactory make;
  std::string_view summary;  // one line, for `kt-exec --list-kernels`
};

// nullptr when this build has no such kernel.
const KernelEntry* find_kernel(std::string_view name);
// Every kernel of this build, sorted by name.
std::span<const KernelEntry> all_kernels();

}  // namespace kt::kern
