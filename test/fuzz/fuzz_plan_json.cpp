// libFuzzer target: plans as JSON (kt-plan pack): FlatBuffers' JSON parser
// against runtime/plan.fbs, the repack, then the plan loader's checks, and the
// way back to JSON. Any error is one line; nothing may crash or leak.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/plan_json.h"
#include "runtime/plan_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  auto bytes = kt::plan_from_json(json, "fuzz.json");
  if (!bytes.ok()) return 0;
  auto plan = kt::PlanFile::from_bytes("fuzz.ktp", *bytes);
  if (!plan.ok()) {
    if (plan.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  (void)plan->check_kernels([](std::string_view k) { return !k.empty(); });
  auto back = kt::plan_to_json(*bytes, "fuzz.ktp");
  (void)back;
  return 0;
}
