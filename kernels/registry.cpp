#include "kernels/registry.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/device.h"
#ifdef KT_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace kt::kern {

namespace {

const std::vector<KernelEntry>& table() {
  static const std::vector<KernelEntry> t = [] {
    std::vector<KernelEntry> v;
    for (const KernelEntry& e : cpu_kernels()) v.push_back(e);
#ifdef KT_WITH_CUDA
    for (const KernelEntry& e : cuda_kernels()) v.push_back(e);
#endif
    std::sort(v.begin(), v.end(), [](const KernelEntry& a, const KernelEntry& b) { return a.name < b.name; });
    return v;
  }();
  return t;
}

}  // namespace

const KernelEntry* find_kernel(std::string_view name) {
  const auto& t = table();
  auto it = std::lower_bound(t.begin(), t.end(), name,
                             [](const KernelEntry& e, std::string_view n) { return e.name < n; });
  return it != t.end() && it->name == name ? &*it : nullptr;
}

std::span<const KernelEntry> all_kernels() { return table(); }

DeviceApi* find_device_api(std::string_view kind) {
#ifdef KT_WITH_CUDA
  if (kind == "cuda") return cuda_device_api();
#endif
  (void)kind;
  return nullptr;
}

}  // namespace kt::kern
