// Values of the chat-template interpreter, with Python's semantics: chat
// templates are written for (and tested against) Python's jinja2, so truthiness,
// ==, <, str(), repr() and json.dumps() must behave as Python's do.
//
// Containers are shared (Python reference semantics): copying a Value copies a
// pointer. Lists and dicts are only mutated in lenient mode (list.append etc.);
// namespaces are the template's one mutable object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/result.h"

namespace kt::jinja {

class Interp;
class Value;
struct CallArgs;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object, Callable };

// What Python type a List value stands for; printing, tojson, len() and
// indexing differ. Generators come from map/select/items & co.: always true,
// no len(), not JSON-serializable.
enum class SeqKind : uint8_t { List, Tuple, Generator };

// Recursion bound for every function that walks a value (printing, ==, <,
// JSON). Values can be cyclic (a namespace holding itself), so the walk must
// be bounded, not just the input.
constexpr int kMaxValueDepth = 256;

// An Undefined value remembers why it is undefined: the message jinja2 raises
// when the value is used (attribute access, call, arithmetic).
struct UndefinedInfo {
  std::string message;
  bool unsafe = false;  // sandbox refusal (SecurityError), not a missing name
};

struct ListData;
class DictData;
class ObjectData;
struct CallableData;
using NativeFn = std::function<Result<Value>(Interp&, CallArgs&)>;

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string message, bool unsafe = false);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s, bool markup = false);
  static Value list(std::vector<Value> items, SeqKind kind = SeqKind::List);
  static Value dict(std::shared_ptr<DictData> d);
  static Value object(std::shared_ptr<ObjectData> o);
  static Value function(std::string name, NativeFn fn, bool is_macro = false);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }
  bool is_number() const { return is_integral() || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? int64_t(b_) : i_; }
  double as_double() const;
  const std::string& str() const { return *static_cast<const std::string*>(p_.get()); }
  bool markup() const { return markup_; }
  ListData& list() const { return *static_cast<ListData*>(p_.get()); }
  SeqKind seq_kind() const;
  DictData& dict() const { return *static_cast<DictData*>(p_.get()); }
  ObjectData& object() const { return *static_cast<ObjectData*>(p_.get()); }
  const CallableData& fn() const { return *static_cast<const CallableData*>(p_.get()); }
  const UndefinedInfo* undefined_info() const {
    return static_cast<const UndefinedInfo*>(p_.get());
  }
  const void* identity() const { return p_.get(); }
  std::shared_ptr<void> shared() const { return p_; }

 private:
  Kind kind_ = Kind::Undefined;
  bool markup_ = false;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> p_;
};

// Containers free their children iteratively (see release_values), so a
// value nested a million deep, which a template can build in a loop, is
// destroyed without a million nested destructor calls.
void release_values(std::vector<Value>& values);

struct ListData {
  ~ListData() { release_values(items); }
  std::vector<Value> items;
  SeqKind kind = SeqKind::List;
};

inline SeqKind Value::seq_kind() const { return list().kind; }

// An insertion-ordered dict with Python key semantics (1 == 1.0 == True).
class DictData {
 public:
  DictData() = default;
  DictData(const DictData&) = default;
  DictData& operator=(const DictData&) = default;
  ~DictData() { clear(); }
  const Value* find(const Value& key) const;  // nullptr when absent or unhashable
  const Value* find(std::string_view key) const;
  Status set(const Value& key, Value value);  // error when the key is unhashable
  void set(std::string_view key, Value value);
  bool erase(const Value& key);
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  void clear();

 private:
  void reindex();
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, size_t, Hash, std::equal_to<>> str_index_;
  std::unordered_map<std::string, size_t> other_index_;  // keys encoded by other_key()
};

// Objects with attributes: namespace() and the loop variable.
class ObjectData {
 public:
  virtual ~ObjectData() = default;
  virtual std::string_view type_name() const = 0;
  virtual Value get(std::string_view attr) const = 0;  // Undefined when absent
  virtual bool is_namespace() const { return false; }
  virtual void set(std::string_view attr, Value v);  // namespaces only
  virtual Result<std::string> repr(int depth) const = 0;
  virtual void clear() {}  // drops references, breaking cycles after a render
};

class NamespaceData final : public ObjectData {
 public:
  std::string_view type_name() const override { return "Namespace"; }
  Value get(std::string_view attr) const override;
  bool is_namespace() const override { return true; }
  void set(std::string_view attr, Value v) override;
  Result<std::string> repr(int depth) const override;
  void clear() override;
  DictData attrs;
};

struct CallableData {
  std::string name;
  NativeFn fn;
  bool is_macro = false;
};

// Walks over values (str(), repr(), ==, <, JSON, iterating a string) are
// charged to the render's step budget and size limit: a small template can
// build a value that is huge to walk ([big] * 100000 shares one big list
// 100000 times). Interp::render installs the budget for its thread.
struct WalkBudget {
  uint64_t* steps;
  uint64_t max_steps;
  size_t max_bytes;
};

class ScopedWalkBudget {
 public:
  explicit ScopedWalkBudget(WalkBudget budget);
  ~ScopedWalkBudget();
  ScopedWalkBudget(const ScopedWalkBudget&) = delete;
  ScopedWalkBudget& operator=(const ScopedWalkBudget&) = delete;

 private:
  WalkBudget budget_;
  WalkBudget* previous_;
};

// Charge the installed budget (no-ops when none is installed).
Status walk_step(uint64_t n = 1);
Status walk_size(size_t bytes);

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// Binds args to a Python signature (params in order; the first `required`
// must be given). Result: one entry per param, nullopt where not given.
Result<std::vector<std::optional<Value>>> bind_args(const CallArgs& args,
                                                    std::initializer_list<std::string_view> params,
                                                    size_t required, std::string_view fname);

bool truthy(const Value& v);
std::string type_name(const Value& v);    // Python's type(v).__name__
std::string object_desc(const Value& v);  // jinja2's object_type_repr: "None", "dict object"
std::string format_float(double f);       // Python's float.__repr__
Result<std::string> to_str(const Value& v);   // Python's str()
Result<std::string> to_repr(const Value& v);  // Python's repr()
Result<bool> equals(const Value& a, const Value& b);
Result<int> compare(const Value& a, const Value& b);  // sign of a - b; TypeError if unorderable
// Python's iter(): list items, dict keys, string code points, Undefined empty.
Result<std::vector<Value>> iterate(const Value& v);
// len(); TypeError for generators, numbers, None.
Result<int64_t> length(const Value& v);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys).
struct JsonStyle {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool allow_generators = false;  // lenient mode: serialize them as lists
};
Result<std::string> to_json(const Value& v, const JsonStyle& style);
Result<Value> from_json(const nlohmann::ordered_json& j);
Result<Value> parse_json(std::string_view text);  // lenient from_json filter

}  // namespace kt::jinja
