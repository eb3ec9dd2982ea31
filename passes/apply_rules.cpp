// kt-apply-rules: KTransformers' optimize rules (optimize.py,
// gen_optimize_config) over the kt module tree. The walk is KTransformers':
// pre-order from the root module (path ""), the first rule whose every given
// condition holds decides a module and the walk stops looking (`break`), and a
// rule with `recursive: False` keeps the walk out of the module's children —
// there the injected operator owns them, so here they follow their parent.
// What KTransformers does at injection time (build the operator with its
// kwargs) becomes the op's `options`, for placement and lowering to read.
// Modules no rule decides get KTransformers' default_device ("cuda:0") there;
// here they are left to kt-place, which decides by arithmetic intensity.
#include <cctype>
#include <string>
#include <vector>

#include "mlir/IR/Builders.h"
#include "passes/Passes.h"
#include "passes/module_options.h"
#include "passes/rules/alias_table.h"
#include "passes/rules/placement_math.h"
#include "passes/rules/rule_file.h"

namespace kt {
#define GEN_PASS_DEF_APPLYRULES
#include "passes/Passes.h.inc"

namespace {

using rules::AliasTable;
using rules::KwValue;
using rules::Rule;
using rules::RuleFile;

// Which kt ops a replace class may stand for, by its alias's kt kind. An
// operator injected where it cannot work (an MoE block on a dense MLP) would
// fail at KTransformers' first forward; here it fails at the rule.
struct Replaceable {
  llvm::StringRef kt_kind;
  std::vector<llvm::StringRef> ops;
};
const std::vector<Replaceable>& replaceable() {
  static const std::vector<Replaceable> table = {
      {"experts", {"experts"}},
      {"moe", {"moe"}},
      {"moe_gate", {"moe_gate"}},
      // Qwen2-MoE's and Mixtral's routers are torch.nn.Linear; KTransformers'
      // Linear rules take them.
      {"linear", {"linear", "lm_head", "moe_gate"}},
      {"mlp", {"mlp"}},
      {"rms_norm", {"rms_norm"}},
      {"attention", {"mla_attention", "gqa_attention"}},
      {"rotary_embedding", {"rotary_embedding"}},
      {"model", {"base_model"}},
  };
  return table;
}

bool can_replace(llvm::StringRef kt_kind, llvm::StringRef op) {
  if (kt_kind == "default") return true;
  for (const Replaceable& r : replaceable())
    if (r.kt_kind == kt_kind) return llvm::is_contained(r.ops, op);
  return false;
}

bool is_device_key(llvm::StringRef k) {
  return k == "generate_device" || k == "prefill_device" || k == "out_device" || k == "device";
}

// The value of a kwarg as PyYAML's FullLoader would type a plain scalar:
// YAML 1.1 booleans, integers, floats, else the string.
mlir::Attribute typed_scalar(mlir::Builder& b, llvm::StringRef s) {
  static const char* truthy[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const char* falsy[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  for (const char* t : truthy)
    if (s == t) return b.getBoolAttr(true);
  for (const char* f : falsy)
    if (s == f) return b.getBoolAttr(false);
  int64_t i = 0;
  if (!s.getAsInteger(10, i)) return b.getI64IntegerAttr(i);
  double d = 0;
  if (!s.empty() && (s.front() == '-' || s.front() == '.' || std::isdigit(static_cast<unsigned char>(s.front()))) && !s.getAsDouble(d))
    return b.getF64FloatAttr(d);
  return b.getStringAttr(s);
}

class RuleApplier {
 public:
  RuleApplier(const RuleFile& file, const AliasTable& aliases, int gpus, mlir::MLIRContext* ctx)
      : file_(file), aliases_(aliases), gpus_(gpus), b_(ctx), used_(file.rules.size(), false) {}

  // Every device a rule names must exist, matched or not: a file written for
  // two GPUs fails on a one-GPU machine before anything is decided.
  Status check_devices() const {
    for (const Rule& r : file_.rules)
      for (const auto& [key, v] : r.kwargs) {
        if (is_device_key(key)) KT_TRY(device(v.scalar, v.loc));
        if (key != "transfer_map") continue;
        if (!v.is_map) return err(v.loc.str(), ": transfer_map must map layer indices to devices");
        for (const auto& [layer, dev] : v.entries) {
          int64_t n = 0;
          if (llvm::StringRef(layer).getAsInteger(10, n) || n < 0)
            return err(v.loc.str(), ": transfer_map key '", printable(layer), "' is not a layer index");
          KT_TRY(device(dev, v.loc));
        }
      }
    return ok_status();
  }

  Status visit(ModuleInterface op) {
    const int index = first_match(op);
    if (index < 0) {
      for (ModuleInterface c : children(op)) KT_TRY(visit(c));
      return ok_status();
    }
    used_[size_t(index)] = true;
    const Rule& rule = file_.rules[size_t(index)];
    KT_TRY(decide(op, rule));
    for (ModuleInterface c : children(op)) {
      if (rule.recursive) KT_TRY(visit(c));
      else follow(c, op);
    }
    return ok_status();
  }

  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < used_.size(); ++i)
      if (!used_[i]) out.push_back(file_.rules[i].loc.str());
    return out;
  }

 private:
  Result<rules::Device> device(const std::string& text, const rules::SourceLoc& loc) const {
    auto d = rules::parse_device(text);
    if (!d) return err(loc.str(), ": unknown device '", printable(text), "' (kt has cpu, cuda and cuda:N)");
    if (d->gpu && d->index >= gpus_)
      return err(loc.str(), ": device '", printable(text), "' does not exist: the machine has ", gpus_,
                 gpus_ == 1 ? " GPU" : " GPUs", " (cuda:0", gpus_ > 1 ? "..cuda:" + std::to_string(gpus_ - 1) : "",
                 "; set --gpus)");
    return *d;
  }

  // KTransformers' test: isinstance(module, match.class) and the name pattern
  // (Rule::matches applies it; the class part is ours, through the bases).
  int first_match(ModuleInterface op) const {
    const std::string path = op.getPath().str(), cls = op.getHfClass().str();
    for (size_t i = 0; i < file_.rules.size(); ++i) {
      const Rule& r = file_.rules[i];
      if (r.match_class && !aliases_.is_instance(cls, *r.match_class)) continue;
      if (r.matches(path, r.match_class ? *r.match_class : cls)) return int(i);
    }
    return -1;
  }

  Status decide(ModuleInterface op, const Rule& rule) {
    auto replace = aliases_.resolve_class(rule.replace_class, rule.replace_loc, nullptr);
    if (!replace) return replace.error();
    if (!can_replace(replace->kt, op_kind(op)))
      return err(rule.replace_loc.str(), ": ", printable(rule.replace_class), " (kt ", replace->kt, ") cannot replace ",
                 op.getPath().str(), " (kt.", op_kind(op).str(), ")");
    mlir::NamedAttrList attrs;
    attrs.set("decided_by", b_.getStringAttr("rule"));
    attrs.set("rule", b_.getStringAttr(rule.loc.str()));
    attrs.set("replace", b_.getStringAttr(rule.replace_class));
    attrs.set("kt_op", b_.getStringAttr(replace->kt));
    bool explicit_gpu = false, prefill_same_as_generate = false;
    for (const auto& [key, v] : rule.kwargs) {
      if (is_device_key(key)) {
        auto d = device(v.scalar, v.loc);
        if (!d) return d.error();
        explicit_gpu |= d->index_given;
        attrs.set(key, b_.getStringAttr(d->str()));
      } else if (key == "generate_op" || key == "prefill_op") {
        if (v.scalar == "None") {  // Python's None: no separate kernel for this phase
          prefill_same_as_generate |= key == "prefill_op";
          continue;
        }
        auto a = aliases_.resolve_op(v.scalar, v.loc, nullptr);
        if (!a) return a.error();
        attrs.set(key, b_.getStringAttr(a->kt));
      } else if (key == "transfer_map") {
        mlir::NamedAttrList map;
        for (const auto& [layer, dev] : v.entries) {
          auto d = device(dev, v.loc);
          if (!d) return d.error();
          map.set(layer, b_.getStringAttr(d->str()));
        }
        attrs.set(key, map.getDictionary(b_.getContext()));
      } else if (v.is_map) {
        mlir::NamedAttrList map;
        for (const auto& [k, s] : v.entries) map.set(k, typed_scalar(b_, s));
        attrs.set(key, map.getDictionary(b_.getContext()));
      } else {
        attrs.set(key, typed_scalar(b_, v.scalar));
      }
    }
    // One phase's device given: KTransformers' operators default the other to
    // "cuda"; kt takes the one the rule wrote, the placement it asked for.
    if (!attrs.get("generate_device") && attrs.get("prefill_device")) attrs.set("generate_device", attrs.get("prefill_device"));
    if (!attrs.get("prefill_device") && attrs.get("generate_device")) attrs.set("prefill_device", attrs.get("generate_device"));
    // prefill_op None: KTransformersExperts/-Linear build no prefill kernel and
    // run prefill with the generate one, on the generate device.
    if (prefill_same_as_generate) {
      if (mlir::Attribute g = attrs.get("generate_op")) attrs.set("prefill_op", g);
      if (mlir::Attribute g = attrs.get("generate_device")) attrs.set("prefill_device", g);
    }
    if (explicit_gpu) attrs.set("explicit_gpu", b_.getBoolAttr(true));
    set_options(op, attrs.getAttrs());
    return ok_status();
  }

  // A child of a `recursive: False` module: no rule looks at it, and the
  // operator that replaced its parent runs it where the parent runs.
  void follow(ModuleInterface op, ModuleInterface owner) {
    mlir::NamedAttrList attrs;
    attrs.set("decided_by", b_.getStringAttr("parent"));
    attrs.set("follows", b_.getStringAttr(owner.getPath()));
    for (llvm::StringRef key : kDeviceKeys)
      if (mlir::Attribute d = option(owner, key)) attrs.set(key, d);
    if (mlir::Attribute e = option(owner, "explicit_gpu")) attrs.set("explicit_gpu", e);
    set_options(op, attrs.getAttrs());
    for (ModuleInterface c : children(op)) follow(c, owner);
  }

  const RuleFile& file_;
  const AliasTable& aliases_;
  int gpus_;
  mlir::Builder b_;
  std::vector<bool> used_;
};

struct ApplyRulesPass : impl::ApplyRulesBase<ApplyRulesPass> {
  using ApplyRulesBase::ApplyRulesBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    Status st = run(module);
    if (!st) {
      module.emitError(st.error().message);
      signalPassFailure();
    }
  }

  Status run(mlir::ModuleOp module) {
    if (rules.empty()) return err("kt-apply-rules needs rules=<rules.yaml>");
    if (gpus < 1) return err("kt-apply-rules: gpus must be at least 1");
    auto file = rules::load_rule_file(rules);
    if (!file) return file.error();
    const AliasTable& aliases = AliasTable::builtin();
    std::vector<std::string> warnings;
    KT_TRY(aliases.check(file.value(), &warnings));
    RuleApplier applier(file.value(), aliases, gpus, module.getContext());
    KT_TRY(applier.check_devices());
    for (mlir::Operation& op : module.getBody()->getOperations())
      if (auto root = llvm::dyn_cast<ModuleInterface>(&op)) {
        KT_TRY(applier.visit(root));
        // For --explain: rules that decided nothing (KTransformers ignores
        // them silently; a typo in a pattern shows here).
        mlir::Builder b(module.getContext());
        llvm::SmallVector<mlir::Attribute> unused;
        for (const std::string& loc : applier.unused()) unused.push_back(b.getStringAttr(loc));
        set_options(root, {b.getNamedAttr("rules_file", b.getStringAttr(rules)),
                           b.getNamedAttr("unused_rules", b.getArrayAttr(unused))});
      }
    // Only a file that compiles warns: a failing one says one thing, its error.
    // "r.yaml:4:27: warning: op 'X': kt uses ..." -> the diagnostic says warning.
    for (std::string& w : warnings) {
      if (size_t at = w.find(": warning: "); at != std::string::npos) w.replace(at, 11, ": ");
      module.emitWarning(w);
    }
    return ok_status();
  }
};

}  // namespace
}  // namespace kt
