// A kt op's `options` dictionary, which the rule and placement passes fill and
// lowering reads (keys: rule, replace, kt_op, generate_device, prefill_device,
// out_device, generate_op, prefill_op, decided_by, placed_by, reason,
// weight_bytes, flops_per_token, intensity_decode, intensity_prefill, and the
// rule's other kwargs). Devices are stored normalised: "cpu" or "cuda:N".
#pragma once

#include <functional>
#include <string>

#include "dialects/KtDialect.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace kt {

using ir::ModuleInterface;

// The devices a decision names (KTransformers' kwargs of the same names).
inline constexpr llvm::StringLiteral kDeviceKeys[] = {"generate_device", "prefill_device", "out_device"};

mlir::Attribute option(ModuleInterface m, llvm::StringRef key);
// A string option, or "" when absent or not a string.
llvm::StringRef option_str(ModuleInterface m, llvm::StringRef key);
bool option_bool(ModuleInterface m, llvm::StringRef key);
// Replaces the given keys, keeping the others (dictionaries stay sorted).
void set_options(ModuleInterface m, llvm::ArrayRef<mlir::NamedAttribute> updates);
void set_option(ModuleInterface m, llvm::StringRef key, mlir::Attribute value);
void set_option(ModuleInterface m, llvm::StringRef key, llvm::StringRef value);

// "linear", "experts", "mla_attention", ...: the op's mnemonic, which is what
// the alias table's kt kinds and the kernel families are named after.
llvm::StringRef op_kind(mlir::Operation* op);
// Child modules of a composite (none for a leaf).
llvm::SmallVector<ModuleInterface> children(ModuleInterface m);
// The enclosing module op, or null at the root.
ModuleInterface parent_module(ModuleInterface m);
// Pre-order over every module op under `root` (the module or a kt.model).
void walk_modules(mlir::Operation* root, const std::function<void(ModuleInterface)>& fn);

// Whether the op's generate device is a GPU ("cuda:N").
bool on_gpu(ModuleInterface m);

}  // namespace kt
