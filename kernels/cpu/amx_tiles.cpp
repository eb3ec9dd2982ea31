#include "kernels/cpu/amx_tiles.h"

#include <cstdlib>
#include <memory>

namespace kt::cpu::matmul_detail {

void* amx_thread_buffer(size_t bytes) {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<uint8_t, Free> p;
  thread_local size_t cap = 0;
  if (bytes > cap) {
    cap = (bytes + 4095) & ~size_t(4095);
    p.reset(static_cast<uint8_t*>(std::aligned_alloc(64, cap)));
  }
  return p.get();
}

}  // namespace kt::cpu::matmul_detail
