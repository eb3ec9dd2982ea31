#include "passes/explain.h"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "passes/module_options.h"
#include "passes/rules/placement_math.h"

namespace kt {
namespace {

std::string num(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

double option_f64(ModuleInterface m, llvm::StringRef key) {
  auto f = llvm::dyn_cast_or_null<mlir::FloatAttr>(option(m, key));
  return f ? f.getValueAsDouble() : 0;
}

int64_t option_i64(ModuleInterface m, llvm::StringRef key) {
  auto i = llvm::dyn_cast_or_null<mlir::IntegerAttr>(option(m, key));
  return i ? i.getInt() : 0;
}

// "/x/y/DeepSeek-V3-Chat.yaml:45:3" -> "DeepSeek-V3-Chat.yaml:45": the column
// adds nothing to a table row, the directory only width.
std::string short_rule(llvm::StringRef loc) {
  llvm::StringRef s = loc.rsplit('/').second.empty() ? loc : loc.rsplit('/').second;
  return s.rsplit(':').first.str();
}

std::string why(ModuleInterface m) {
  if (option_str(m, "decided_by") == "parent") return "follows " + option_str(m, "follows").str() + " (recursive: False)";
  std::string rule = option_str(m, "rule").empty() ? "" : "rule " + short_rule(option_str(m, "rule"));
  if (option_str(m, "placed_by") != "place") return rule;
  return (rule.empty() ? "" : rule + "; ") + option_str(m, "reason").str();
}

std::string kt_op(ModuleInterface m) {
  llvm::StringRef k = option_str(m, "kt_op");
  return (k.empty() || k == "default" ? op_kind(m) : k).str();
}

}  // namespace

void print_explain(mlir::ModuleOp module, llvm::raw_ostream& os) {
  using Row = std::vector<std::string>;
  std::vector<Row> rows = {{"path", "kt op", "decode", "prefill", "weight B", "FLOP/token", "I decode", "I prefill", "why"}};
  std::map<std::string, uint64_t> per_device;
  std::vector<std::string> notes, experts;
  for (mlir::Operation& top : module.getBody()->getOperations()) {
    auto root = llvm::dyn_cast<ModuleInterface>(&top);
    if (!root) continue;
    if (auto budget = llvm::dyn_cast_or_null<mlir::IntegerAttr>(option(root, "gpu_budget")))
      notes.push_back("GPU memory for weights: " + rules::format_bytes(uint64_t(budget.getInt())) + " per GPU (" +
                      option_str(root, "gpu_budget_note").str() + ")");
    if (auto unused = llvm::dyn_cast_or_null<mlir::ArrayAttr>(option(root, "unused_rules")))
      for (mlir::Attribute a : unused)
        if (auto s = llvm::dyn_cast<mlir::StringAttr>(a)) notes.push_back("rule " + s.getValue().str() + " matched no module");
    if (!option_str(root, "routing_profile").empty()) {
      // kt-place-experts: per layer, the experts on the GPU and their share.
      experts.push_back("hot experts on the GPU from routing profile " + option_str(root, "routing_profile").str() +
                        " (" + rules::format_bytes(uint64_t(option_i64(root, "gpu_experts_bytes"))) + " of the " +
                        rules::format_bytes(uint64_t(option_i64(root, "gpu_experts_room"))) + " left):");
      walk_modules(root, [&](ModuleInterface m) {
        auto ids = llvm::dyn_cast_or_null<mlir::DenseI64ArrayAttr>(option(m, "gpu_experts"));
        if (!ids) return;
        std::string list;
        for (int64_t e : ids.asArrayRef()) list += (list.empty() ? "" : " ") + std::to_string(e);
        experts.push_back("  " + m.getPath().str() + ": " + std::to_string(ids.size()) + " experts, " +
                          num(100.0 * option_f64(m, "gpu_expert_share")) + "% of its routed choices: " + list);
      });
      if (option(root, "predicted_decode_tok_s_without_profile"))
        experts.push_back("predicted decode (CPU-bound, " + num(option_f64(root, "cpu_bandwidth_gbs")) + " GB/s): " +
                          (option(root, "predicted_decode_tok_s")
                               ? num(option_f64(root, "predicted_decode_tok_s")) + " tok/s with the profile, "
                               : std::string("no CPU weights left with the profile (GPU-bound), ")) +
                          num(option_f64(root, "predicted_decode_tok_s_without_profile")) + " tok/s without");
    }
    walk_modules(root, [&](ModuleInterface m) {
      if (!option(m, "weight_bytes")) return;
      uint64_t bytes = uint64_t(option_i64(m, "weight_bytes"));
      const std::string dev = option_str(m, "generate_device").str();
      if (auto ids = llvm::dyn_cast_or_null<mlir::DenseI64ArrayAttr>(option(m, "gpu_experts"))) {
        // Its hot experts are resident on the block's GPU.
        auto ex = llvm::dyn_cast<ir::ExpertsOp>(m.getOperation());
        const uint64_t on_gpu = ex ? bytes / uint64_t(ex.getGateProj().dim(2)) * ids.size() : 0;
        if (ModuleInterface block = parent_module(m)) per_device[option_str(block, "generate_device").str()] += on_gpu;
        bytes -= on_gpu;
      }
      per_device[dev] += bytes;
      bytes = uint64_t(option_i64(m, "weight_bytes"));
      rows.push_back({m.getPath().str(), kt_op(m),
                      option_str(m, "generate_op").str() + "@" + dev,
                      option_str(m, "prefill_op").str() + "@" + option_str(m, "prefill_device").str(),
                      std::to_string(bytes), std::to_string(option_i64(m, "flops_per_token")),
                      num(option_f64(m, "intensity_decode")), num(option_f64(m, "intensity_prefill")), why(m)});
    });
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const Row& r : rows)
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  for (const Row& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      // Numbers right-aligned, text left; the last column unpadded.
      const bool numeric = i >= 4 && i <= 7;
      const std::string pad(width[i] - r[i].size(), ' ');
      if (i + 1 == r.size()) line += r[i];
      else line += (numeric ? pad + r[i] : r[i] + pad) + "  ";
    }
    os << line << "\n";
  }
  os << "\nweights per device (decode residency):\n";
  uint64_t total = 0;
  for (const auto& [dev, bytes] : per_device) {
    os << "  " << dev << ": " << bytes << " bytes (" << rules::format_bytes(bytes) << ")\n";
    total += bytes;
  }
  os << "  total: " << total << " bytes (" << rules::format_bytes(total) << ")\n";
  for (const std::string& n : notes) os << n << "\n";
  for (const std::string& n : experts) os << n << "\n";
}

}  // namespace kt
