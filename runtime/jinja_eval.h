// The chat-template evaluator: scopes, the interpreter state of one render,
// and the tables of built-in filters, tests, methods and globals it calls.
//
// Safety: a render is bounded in steps (every statement, expression, loop
// iteration and value walk costs one; every 16 bytes a built-in produces cost
// one), in C++ stack (evaluation nesting and macro call depth) and in string
// and output size, so neither a hostile template nor hostile messages can
// hang, crash or exhaust memory.
#pragma once

#include <ctime>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/jinja_ast.h"
#include "runtime/jinja_value.h"
#include "runtime/result.h"

namespace kt::jinja {

// Every byte a built-in produces costs steps, so the step budget also bounds
// the memory a render can allocate (max_steps * kBytesPerStep in total).
constexpr size_t kBytesPerStep = 16;

struct RenderConfig {
  uint64_t max_steps = 20'000'000;
  int max_call_depth = 40;      // nested macro calls
  int max_nesting = 400;        // evaluator recursion (expressions + statements + calls)
  size_t max_output_bytes = 16u << 20;  // also bounds every string value
  bool lenient = false;         // list.append/pop, from_json, tojson of generators
  std::tm now{};                // what strftime_now formats
};

// Variables of one frame. Lookups walk to the parent; `set` binds locally,
// which gives jinja2's scoping: a for-loop iteration, a macro call and a
// set-block are frames, `if` is not.
struct Scope {
  explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}
  const Value* lookup(std::string_view name) const;
  void set(std::string_view name, Value v);

  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { Normal, Break, Continue };

class Interp {
 public:
  Interp(const Template& tpl, const RenderConfig& cfg);
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  // Renders the template with these variables (on top of the globals).
  Result<std::string> render(std::vector<std::pair<std::string, Value>> vars);

  // ---- services for built-ins ----
  const RenderConfig& config() const { return cfg_; }
  Status step(uint64_t n = 1);
  // Charges for producing a string of this size (one step per kBytesPerStep)
  // and refuses one over the size limit.
  Status charge_bytes(size_t bytes);
  // Refuses a string over the size limit without charging (for checks inside
  // a loop that charges once at the end).
  Status check_size(size_t bytes) const;
  Result<Value> call(const Value& fn, CallArgs& args);
  Result<Value> apply_filter(std::string_view name, const Value& subject, CallArgs& args);
  Result<bool> apply_test(std::string_view name, const Value& subject, CallArgs& args);
  Result<Value> get_attr(const Value& obj, std::string_view name);
  Result<Value> get_item(const Value& obj, const Value& key);
  // Remembers a mutable container so its references are dropped after the
  // render (reference cycles through namespaces would otherwise leak).
  void track(std::shared_ptr<void> container, void (*clear)(void*));

 private:
  Result<Flow> exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Result<Flow> exec(const Node& node, const ScopePtr& scope, std::string& out);
  Result<Flow> exec_for(const Node& node, const ScopePtr& scope, std::string& out);
  Status assign(const Target& t, const Value& v, const ScopePtr& scope, uint32_t pos);
  Status append(std::string& out, std::string_view text, uint32_t pos);
  Result<Value> eval(const Expr& e, const ScopePtr& scope);
  Result<Value> eval_inner(const Expr& e, const ScopePtr& scope);
  Result<Value> eval_call(const Expr& e, const ScopePtr& scope);
  Result<Value> eval_slice(const Expr& e, const ScopePtr& scope);
  Status eval_args(const Expr& e, size_t first, const ScopePtr& scope, CallArgs& args);
  Result<Value> call_macro(const Node& macro, const std::weak_ptr<Scope>& def_scope, CallArgs& args);
  Value make_macro(const Node& macro, const ScopePtr& scope);
  Error located(uint32_t pos, const Error& e) const;

  const Template& tpl_;
  RenderConfig cfg_;
  uint64_t steps_ = 0;
  int nesting_ = 0;
  int call_depth_ = 0;
  Value slot_;  // the value a {% filter %} / {% set x | f %} block applies its filters to
  std::vector<std::pair<std::shared_ptr<void>, void (*)(void*)>> tracked_;
};

// ---- built-ins (jinja_filters*.cpp, jinja_tests.cpp, jinja_methods.cpp) ----

using FilterFn = Result<Value> (*)(Interp&, const Value& subject, CallArgs& args);
using TestFn = Result<bool> (*)(Interp&, const Value& subject, CallArgs& args);
using MethodFn = Result<Value> (*)(Interp&, const Value& self, CallArgs& args);

FilterFn find_filter(std::string_view name, bool lenient);
struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};
std::span<const FilterEntry> sequence_filters();  // jinja_filters_seq.cpp
TestFn find_test(std::string_view name);
// The Python method `name` of obj (str, list, dict); nullptr when there is
// none. Methods that mutate are refused in the sandbox: *unsafe is set
// instead, unless lenient.
MethodFn find_method(const Value& obj, std::string_view name, bool lenient, bool* unsafe);
// range, dict, namespace, raise_exception, strftime_now.
void install_globals(Scope& globals);

// Operators (jinja_operators.cpp).
Result<Value> binary_op(Interp& in, std::string_view op, const Value& a, const Value& b);
Result<bool> compare_op(std::string_view op, const Value& a, const Value& b);
Result<bool> contains(const Value& container, const Value& item);
// The error jinja2 raises when an Undefined is used.
Error undefined_error(const Value& v);

}  // namespace kt::jinja
