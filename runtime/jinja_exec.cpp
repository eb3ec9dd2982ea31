// Statement execution of the chat-template interpreter ({% for %}, {% if %},
// {% set %}, macros, ...) with jinja2 3.1's scoping, plus the render entry
// point and the budget accounting. Expressions are in jinja_eval.cpp.
#include <algorithm>

#include "runtime/jinja_eval.h"

namespace kt::jinja {
namespace {

// jinja2's LoopContext: one object per loop, advanced every iteration.
class LoopData final : public ObjectData, public std::enable_shared_from_this<LoopData> {
 public:
  explicit LoopData(std::vector<Value> items) : items_(std::move(items)) {}
  std::string_view type_name() const override { return "LoopContext"; }
  Result<std::string> repr(int) const override {
    return "<LoopContext " + std::to_string(index_ + 1) + "/" + std::to_string(items_.size()) + ">";
  }
  void advance_to(size_t i) { index_ = i; }
  const std::vector<Value>& items() const { return items_; }

  Value get(std::string_view a) const override {
    const int64_t i = int64_t(index_), n = int64_t(items_.size());
    if (a == "index") return Value::integer(i + 1);
    if (a == "index0") return Value::integer(i);
    if (a == "revindex") return Value::integer(n - i);
    if (a == "revindex0") return Value::integer(n - i - 1);
    if (a == "first") return Value::boolean(i == 0);
    if (a == "last") return Value::boolean(i == n - 1);
    if (a == "length") return Value::integer(n);
    if (a == "depth") return Value::integer(1);
    if (a == "depth0") return Value::integer(0);
    if (a == "previtem")
      return i > 0 ? items_[size_t(i - 1)] : Value::undefined("there is no previous item");
    if (a == "nextitem")
      return i + 1 < n ? items_[size_t(i + 1)] : Value::undefined("there is no next item");
    auto self = std::const_pointer_cast<LoopData>(shared_from_this());
    if (a == "cycle")
      return Value::function("cycle", [self](Interp&, CallArgs& args) -> Result<Value> {
        if (args.pos.empty()) return err("TypeError: no items for cycling given");
        return args.pos[self->index_ % args.pos.size()];
      });
    if (a == "changed")
      return Value::function("changed", [self](Interp&, CallArgs& args) -> Result<Value> {
        Value now = Value::list(args.pos);
        bool first = !self->has_last_;
        auto same = first ? Result<bool>(false) : equals(now, self->last_changed_);
        if (!same) return same.error();
        self->last_changed_ = now;
        self->has_last_ = true;
        return Value::boolean(!*same);
      });
    return Value::undefined("'LoopContext object' has no attribute '" + std::string(a) + "'");
  }
  void clear() override {
    items_.clear();
    last_changed_ = Value();
  }

 private:
  std::vector<Value> items_;
  size_t index_ = 0;
  Value last_changed_;
  bool has_last_ = false;
};

}  // namespace

const Value* Scope::lookup(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(std::string_view name, Value v) {
  for (auto& [k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(std::string(name), std::move(v));
}

Interp::Interp(const Template& tpl, const RenderConfig& cfg) : tpl_(tpl), cfg_(cfg) {}

Interp::~Interp() {
  for (auto& [p, clear] : tracked_) clear(p.get());
}

void Interp::track(std::shared_ptr<void> container, void (*clear)(void*)) {
  tracked_.emplace_back(std::move(container), clear);
}

Status Interp::step(uint64_t n) {
  steps_ += n;
  if (steps_ > cfg_.max_steps)
    return err("template exceeded its step budget (", cfg_.max_steps, " steps)");
  return ok_status();
}

Status Interp::check_size(size_t bytes) const {
  if (bytes > cfg_.max_output_bytes)
    return err("MemoryError: string of ", bytes, " bytes exceeds the limit of ",
               cfg_.max_output_bytes);
  return ok_status();
}

Status Interp::charge_bytes(size_t bytes) {
  KT_TRY(check_size(bytes));
  return step(bytes / kBytesPerStep);
}

Error Interp::located(uint32_t pos, const Error& e) const {
  const std::string& name = tpl_.map.name;
  if (e.message.compare(0, name.size() + 1, name + ":") == 0) return e;
  return err(tpl_.map.where(pos), ": ", e.message);
}

Result<std::string> Interp::render(std::vector<std::pair<std::string, Value>> vars) {
  ScopedWalkBudget budget({&steps_, cfg_.max_steps, cfg_.max_output_bytes});
  auto globals = std::make_shared<Scope>(nullptr);
  install_globals(*globals);
  auto root = std::make_shared<Scope>(globals);
  root->vars = std::move(vars);
  std::string out;
  auto flow = exec_body(tpl_.body, root, out);
  if (!flow) return flow.error();
  return out;
}

Status Interp::append(std::string& out, std::string_view text, uint32_t pos) {
  if (out.size() + text.size() > cfg_.max_output_bytes)
    return err(tpl_.map.where(pos), ": output exceeds the limit of ", cfg_.max_output_bytes,
               " bytes");
  out.append(text);
  return step(text.size() / kBytesPerStep);
}

// ---- statements ----

Result<Flow> Interp::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& n : body) {
    auto f = exec(*n, scope, out);
    if (!f || *f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Result<Flow> Interp::exec(const Node& n, const ScopePtr& scope, std::string& out) {
  KT_TRY(step());
  if (++nesting_ > cfg_.max_nesting) {
    --nesting_;
    return err(tpl_.map.where(n.pos), ": RecursionError: template nested deeper than ",
               cfg_.max_nesting, " levels");
  }
  struct Leave {
    int& n;
    ~Leave() { --n; }
  } leave{nesting_};

  switch (n.kind) {
    case NodeKind::Text: KT_TRY(append(out, n.text, n.pos)); return Flow::Normal;
    case NodeKind::Output: {
      auto v = eval(*n.expr, scope);
      if (!v) return v.error();
      if (v->is_string()) {
        KT_TRY(append(out, v->str(), n.pos));
      } else {
        auto s = to_str(*v);
        if (!s) return located(n.pos, s.error());
        KT_TRY(append(out, *s, n.pos));
      }
      return Flow::Normal;
    }
    case NodeKind::If:
      for (const auto& br : n.branches) {
        bool take = true;
        if (br.cond) {
          auto c = eval(*br.cond, scope);
          if (!c) return c.error();
          take = truthy(*c);
        }
        if (take) return exec_body(br.body, scope, out);
      }
      return Flow::Normal;
    case NodeKind::For: return exec_for(n, scope, out);
    case NodeKind::Set: {
      auto v = eval(*n.expr, scope);
      if (!v) return v.error();
      KT_TRY(assign(n.target, *v, scope, n.pos));
      return Flow::Normal;
    }
    case NodeKind::SetBlock:
    case NodeKind::FilterBlock: {
      std::string buf;
      auto inner = std::make_shared<Scope>(scope);
      auto f = exec_body(n.body, inner, buf);
      if (!f) return f.error();
      Value v = Value::string(std::move(buf));
      if (n.expr) {
        Value saved = slot_;
        slot_ = v;
        auto r = eval(*n.expr, scope);
        slot_ = saved;
        if (!r) return r.error();
        v = *r;
      }
      if (n.kind == NodeKind::SetBlock) {
        KT_TRY(assign(n.target, v, scope, n.pos));
      } else {
        auto s = to_str(v);
        if (!s) return located(n.pos, s.error());
        KT_TRY(append(out, *s, n.pos));
      }
      return Flow::Normal;
    }
    case NodeKind::Macro: scope->set(n.text, make_macro(n, scope)); return Flow::Normal;
    case NodeKind::With: {
      auto inner = std::make_shared<Scope>(scope);
      for (size_t k = 0; k < n.params.size(); ++k) {
        auto v = eval(*n.defaults[k], scope);
        if (!v) return v.error();
        inner->set(n.params[k], *v);
      }
      return exec_body(n.body, inner, out);
    }
    case NodeKind::Break: return Flow::Break;
    case NodeKind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

Status Interp::assign(const Target& t, const Value& v, const ScopePtr& scope, uint32_t pos) {
  if (!t.attr.empty()) {
    const Value* ns = scope->lookup(t.names[0]);
    if (!ns || !ns->is_object() || !ns->object().is_namespace())
      return err(tpl_.map.where(pos),
                 ": TemplateRuntimeError: cannot assign attribute on non-namespace object");
    ns->object().set(t.attr, v);
    return ok_status();
  }
  if (!t.tuple) {
    scope->set(t.names[0], v);
    return ok_status();
  }
  auto items = iterate(v);
  if (!items) return located(pos, items.error());
  if (items->size() != t.names.size())
    return err(tpl_.map.where(pos), ": ValueError: ",
               items->size() > t.names.size() ? "too many" : "not enough",
               " values to unpack (expected ", t.names.size(), ", got ", items->size(), ")");
  for (size_t k = 0; k < items->size(); ++k) scope->set(t.names[k], (*items)[k]);
  return ok_status();
}

Result<Flow> Interp::exec_for(const Node& n, const ScopePtr& scope, std::string& out) {
  auto seq = eval(*n.expr, scope);
  if (!seq) return seq.error();
  if (seq->is_undefined() && seq->undefined_info() && seq->undefined_info()->unsafe)
    return located(n.expr->pos, undefined_error(*seq));
  auto items = iterate(*seq);
  if (!items) return located(n.expr->pos, items.error());
  if (n.cond) {
    // jinja2 filters the iterable before the loop sees it, so loop.length,
    // loop.last and loop.index count only the items that pass.
    std::vector<Value> kept;
    for (const Value& item : *items) {
      KT_TRY(step());
      auto probe = std::make_shared<Scope>(scope);
      KT_TRY(assign(n.target, item, probe, n.pos));
      auto c = eval(*n.cond, probe);
      if (!c) return c.error();
      if (truthy(*c)) kept.push_back(item);
    }
    *items = std::move(kept);
  }
  if (items->empty()) {
    if (n.else_body.empty()) return Flow::Normal;
    auto inner = std::make_shared<Scope>(scope);
    auto f = exec_body(n.else_body, inner, out);
    if (!f) return f.error();
    return Flow::Normal;
  }
  auto loop = std::make_shared<LoopData>(std::move(*items));
  track(loop, [](void* p) { static_cast<LoopData*>(p)->clear(); });
  Value loop_value = Value::object(loop);
  for (size_t i = 0; i < loop->items().size(); ++i) {
    KT_TRY(step());
    loop->advance_to(i);
    auto iter = std::make_shared<Scope>(scope);
    KT_TRY(assign(n.target, loop->items()[i], iter, n.pos));
    iter->set("loop", loop_value);
    auto f = exec_body(n.body, iter, out);
    if (!f) return f.error();
    if (*f == Flow::Break) break;
  }
  return Flow::Normal;
}

// ---- macros ----

Value Interp::make_macro(const Node& macro, const ScopePtr& scope) {
  // The macro sees its defining scope as it is when called (jinja2 closes
  // over the frame); a weak reference avoids a scope -> macro -> scope cycle.
  std::weak_ptr<Scope> def_scope = scope;
  const Node* node = &macro;
  return Value::function(
      macro.text,
      [node, def_scope](Interp& in, CallArgs& args) { return in.call_macro(*node, def_scope, args); },
      true);
}

Result<Value> Interp::call_macro(const Node& m, const std::weak_ptr<Scope>& def_scope,
                                 CallArgs& args) {
  auto parent = def_scope.lock();
  if (!parent) return err(tpl_.map.where(m.pos), ": macro '", m.text, "' outlived its scope");
  if (call_depth_ + 1 > cfg_.max_call_depth)
    return err(tpl_.map.where(m.pos), ": RecursionError: macro calls nested deeper than ",
               cfg_.max_call_depth);
  const size_t np = m.params.size(), first_default = np - m.defaults.size();
  if (args.pos.size() > np)
    return err(tpl_.map.where(m.pos), ": TypeError: macro '", m.text, "' takes not more than ", np,
               " argument(s)");
  auto scope = std::make_shared<Scope>(parent);
  std::vector<bool> given(np, false);
  for (size_t k = 0; k < args.pos.size(); ++k) {
    scope->set(m.params[k], args.pos[k]);
    given[k] = true;
  }
  for (const auto& [key, value] : args.kw) {
    auto it = std::find(m.params.begin(), m.params.end(), key);
    if (it == m.params.end())
      return err(tpl_.map.where(m.pos), ": TypeError: macro '", m.text,
                 "' takes no keyword argument '", key, "'");
    size_t k = size_t(it - m.params.begin());
    if (given[k])
      return err(tpl_.map.where(m.pos), ": TypeError: macro '", m.text,
                 "' got multiple values for argument '", key, "'");
    scope->set(key, value);
    given[k] = true;
  }
  for (size_t k = 0; k < np; ++k) {
    if (given[k]) continue;
    if (k >= first_default) {
      auto d = eval(*m.defaults[k - first_default], scope);
      if (!d) return d.error();
      scope->set(m.params[k], *d);
    } else {
      scope->set(m.params[k], Value::undefined("parameter '" + m.params[k] + "' was not provided"));
    }
  }
  ++call_depth_;
  std::string out;
  auto f = exec_body(m.body, scope, out);
  --call_depth_;
  if (!f) return f.error();
  return Value::string(std::move(out));
}

}  // namespace kt::jinja
