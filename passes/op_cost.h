// What placement needs to know about an op from the IR: its weights (elements
// and bytes from the ggml type table) and how its work scales with tokens, and
// the model dimensions behind the GPU's KV cache and activation reserve.
#pragma once

#include <optional>

#include "dialects/KtDialect.h"
#include "passes/rules/placement_math.h"
#include "runtime/result.h"

namespace kt {

// The cost inputs of an op with weights; nullopt for a weightless op (rope,
// composites). An error names the op's path when a weight's type is unknown.
Result<std::optional<rules::CostInputs>> cost_inputs(ir::ModuleInterface op, int64_t prefill_len);

rules::ModelDims model_dims(ir::HParamsAttr hp);

}  // namespace kt
