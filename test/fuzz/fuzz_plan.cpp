// libFuzzer target: the plan loader (size prefix, FlatBuffers verifier, kt's
// index and arena checks), then a walk over every call as the executor would.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "runtime/plan_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = kt::PlanFile::from_bytes("fuzz.ktp", std::vector<uint8_t>(data, data + size));
  if (!p.ok()) {
    if (p.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  (void)p->check_kernels([](std::string_view k) { return !k.empty(); });
  (void)p->gguf_path();
  const auto& pl = p->plan();
  for (const auto* ph : *pl.phases()) {
    if (!ph->calls()) continue;
    for (const auto* c : *ph->calls()) {
      if (c->inputs())
        for (int b : *c->inputs()) (void)pl.buffers()->Get(uint32_t(b))->offset();
      if (c->weights())
        for (int w : *c->weights()) (void)pl.weights()->Get(uint32_t(w))->tensor();
    }
  }
  return 0;
}
