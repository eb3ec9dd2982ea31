// kt_exec.plan -> the FlatBuffers plan (runtime/plan.fbs), size-prefixed, as
// the runtime loads it. The two mirror each other one to one: names become
// indices (devices, weights, buffers, KV caches in the order the IR holds
// them), attribute dictionaries become Param lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dialects/KtExecDialect.h"
#include "runtime/result.h"

namespace kt {

Result<std::vector<uint8_t>> write_plan(exec::PlanOp plan, const std::string& producer);

}  // namespace kt
