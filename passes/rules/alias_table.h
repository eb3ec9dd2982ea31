// The alias table (rules/aliases.yaml, compiled into the binary): what the
// class and operator names of KTransformers' rule files mean in kt.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "passes/rules/rule_file.h"
#include "runtime/result.h"

namespace kt::rules {

struct Alias {
  std::string kt;           // the kt op kind or kernel family
  std::string instead;      // non-empty: accepted with this warning
  std::string unsupported;  // non-empty: refused with this reason
};

class AliasTable {
 public:
  static Result<AliasTable> parse(std::string_view yaml_text, const std::string& name);
  // The table built into this binary (rules/aliases.yaml at build time).
  static const AliasTable& builtin();

  // The kt op kind of a model class (match.class), or nullptr.
  const std::string* model_class(std::string_view cls) const;
  // Python's isinstance for a module of class `cls` and a rule's match.class:
  // the same class, a base listed under `bases:` (transitively), or
  // torch.nn.Module, which every module is.
  bool is_instance(std::string_view cls, std::string_view of) const;
  // replace.class and generate_op/prefill_op: the alias, or an error at `loc`
  // naming the unknown or unsupported name. A warning is appended for `instead`.
  Result<Alias> resolve_class(const std::string& name, const SourceLoc& loc, std::vector<std::string>* warnings) const;
  Result<Alias> resolve_op(const std::string& name, const SourceLoc& loc, std::vector<std::string>* warnings) const;

  // Checks every name a rule file uses, so a bad file fails before any pass runs.
  Status check(const RuleFile& f, std::vector<std::string>* warnings) const;

 private:
  std::map<std::string, std::string, std::less<>> model_classes_;
  std::map<std::string, std::vector<std::string>, std::less<>> bases_;
  std::map<std::string, Alias, std::less<>> classes_, ops_;
};

}  // namespace kt::rules
