// Arithmetic, comparison and membership with Python's semantics (int
// overflow is an error instead of a big int), plus str % args formatting.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "runtime/jinja_eval.h"
#include "runtime/jinja_text.h"

namespace kt::jinja {
namespace {

// Lists built by repetition or concatenation are bounded like strings, by
// counting 16 bytes an item against the size limit.
constexpr size_t kItemBytes = 16;

Error unsupported(std::string_view op, const Value& a, const Value& b) {
  return err("TypeError: unsupported operand type(s) for ", op, ": '", type_name(a), "' and '",
             type_name(b), "'");
}

Error overflow() { return err("OverflowError: integer result out of range"); }

Result<Value> repeat(Interp& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (n > 0 && s.size() > 0 && uint64_t(n) > (uint64_t(1) << 40) / s.size())
      return err("MemoryError: repeated string too large");
    KT_TRY(in.charge_bytes(s.size() * size_t(n)));
    std::string out;
    out.reserve(s.size() * size_t(n));
    for (int64_t k = 0; k < n; ++k) out += s;
    return Value::string(std::move(out), seq.markup());
  }
  const auto& items = seq.list().items;
  if (n > 0 && items.size() > 0 && uint64_t(n) > (uint64_t(1) << 40) / items.size())
    return err("MemoryError: repeated list too large");
  KT_TRY(in.charge_bytes(items.size() * size_t(n) * kItemBytes));
  std::vector<Value> out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.seq_kind());
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Result<Value> arith(std::string_view op, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    }
    if (op == "/") {
      if (y == 0) return err("ZeroDivisionError: division by zero");
      return Value::number(double(x) / double(y));
    }
    if (op == "//" || op == "%") {
      if (y == 0)
        return err("ZeroDivisionError: integer ", op == "%" ? "modulo" : "division or modulo", " by zero");
      if (x == INT64_MIN && y == -1) return op == "%" ? Value::integer(0) : Result<Value>(overflow());
      int64_t q = floor_div(x, y);
      return Value::integer(op == "//" ? q : x - q * y);
    }
    if (op == "**") {
      if (y < 0) return Value::number(std::pow(double(x), double(y)));
      int64_t result = 1, base = x;
      for (int64_t e = y; e > 0; e >>= 1) {
        if ((e & 1) && __builtin_mul_overflow(result, base, &result)) return overflow();
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) return overflow();
      }
      return Value::integer(result);
    }
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "/") {
    if (y == 0) return err("ZeroDivisionError: float division by zero");
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return err("ZeroDivisionError: float modulo");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value::number(m);
    return Value::number(std::round((x - m) / y));
  }
  if (op == "**") {
    if (x == 0 && y < 0) return err("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    return Value::number(std::pow(x, y));
  }
  return err("unknown operator ", op);
}

// printf-style str % args, the subset templates use.
Result<Value> percent_format(Interp& in, const Value& fmt, const Value& args) {
  std::vector<Value> pos;
  const DictData* mapping = nullptr;
  if (args.is_list() && args.seq_kind() == SeqKind::Tuple)
    pos = args.list().items;
  else if (args.is_dict())
    mapping = &args.dict();
  else
    pos.push_back(args);
  const std::string& f = fmt.str();
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) return err("ValueError: incomplete format");
    if (f[i] == '%') {
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    if (f[i] == '(') {
      size_t close = f.find(')', i);
      if (close == std::string::npos || !mapping) return err("TypeError: format requires a mapping");
      arg = mapping->find(std::string_view(f).substr(i + 1, close - i - 1));
      if (!arg) return err("KeyError: '", f.substr(i + 1, close - i - 1), "'");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < f.size() && std::string_view("-+ 0#").find(f[i]) != std::string_view::npos) spec += f[i++];
    while (i < f.size() && ((f[i] >= '0' && f[i] <= '9') || f[i] == '.')) spec += f[i++];
    if (i >= f.size()) return err("ValueError: incomplete format");
    char conv = f[i];
    if (!arg) {
      if (next >= pos.size()) return err("TypeError: not enough arguments for format string");
      arg = &pos[next++];
    }
    char buf[512];
    if (conv == 's' || conv == 'r') {
      auto s = conv == 's' ? to_str(*arg) : to_repr(*arg);
      if (!s) return s.error();
      // Flags, width and precision on %s: pad/truncate by code points.
      bool left = spec.find('-') != std::string::npos;
      size_t dot = spec.find('.');
      std::string w = spec.substr(1, dot == std::string::npos ? std::string::npos : dot - 1);
      w.erase(0, w.find_first_not_of("-+ 0#"));
      std::string str = *s;
      if (dot != std::string::npos) {
        int64_t prec = std::atoll(spec.c_str() + dot + 1);
        str = text::slice(str, 0, prec, 1);
      }
      size_t width = w.empty() ? 0 : size_t(std::min(std::atoll(w.c_str()), 4096LL));
      size_t len = text::length(str);
      std::string pad(width > len ? width - len : 0, ' ');
      out += left ? str + pad : pad + str;
    } else if (std::string_view("diouxXeEfFgGc").find(conv) != std::string_view::npos) {
      if (!arg->is_number()) return err("TypeError: %", conv, " format: a real number is required, not ", type_name(*arg));
      if (spec.size() > 20) return err("ValueError: format spec too long");
      if (std::string_view("diouxXc").find(conv) != std::string_view::npos) {
        std::string s = spec + "ll" + (conv == 'i' || conv == 'u' ? 'd' : conv);
        std::snprintf(buf, sizeof buf, s.c_str(), (long long)(arg->is_float() ? int64_t(arg->as_double()) : arg->as_int()));
      } else {
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg->as_double());
      }
      out += buf;
    } else {
      return err("ValueError: unsupported format character '", std::string(1, conv), "'");
    }
    KT_TRY(in.check_size(out.size()));
  }
  KT_TRY(in.charge_bytes(out.size()));
  if (!mapping && next < pos.size())
    return err("TypeError: not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

}  // namespace

Error undefined_error(const Value& v) {
  const UndefinedInfo* info = v.undefined_info();
  if (info && info->unsafe) return err("SecurityError: ", info->message);
  return err("UndefinedError: ", info ? info->message : std::string("value is undefined"));
}

Result<Value> binary_op(Interp& in, std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    auto x = to_str(a);
    if (!x) return x.error();
    auto y = to_str(b);
    if (!y) return y.error();
    KT_TRY(in.charge_bytes(x->size() + y->size()));
    return Value::string(*x + *y);
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) return arith(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      KT_TRY(in.charge_bytes(a.str().size() + b.str().size()));
      // Markup + str escapes the str (markupsafe), str + str does not.
      if (a.markup() != b.markup()) {
        std::string x = a.markup() ? a.str() : text::html_escape(a.str());
        std::string y = b.markup() ? b.str() : text::html_escape(b.str());
        return Value::string(x + y, true);
      }
      return Value::string(a.str() + b.str(), a.markup());
    }
    if (a.is_list() && b.is_list() && a.seq_kind() == b.seq_kind() &&
        a.seq_kind() != SeqKind::Generator) {
      KT_TRY(in.charge_bytes((a.list().items.size() + b.list().items.size()) * kItemBytes));
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::list(std::move(items), a.seq_kind());
    }
    if (a.is_string() || (a.is_list() && a.seq_kind() != SeqKind::Generator))
      return err("TypeError: can only concatenate ", type_name(a), " (not \"", type_name(b), "\") to ",
                 type_name(a));
    return unsupported(op, a, b);
  }
  if (op == "*") {
    bool seq_a = a.is_string() || (a.is_list() && a.seq_kind() != SeqKind::Generator);
    bool seq_b = b.is_string() || (b.is_list() && b.seq_kind() != SeqKind::Generator);
    if (seq_a && b.is_integral()) return repeat(in, a, b.as_int());
    if (seq_b && a.is_integral()) return repeat(in, b, a.as_int());
    return unsupported(op, a, b);
  }
  if (op == "%" && a.is_string()) return percent_format(in, a, b);
  return unsupported(op, a, b);
}

Result<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined: return false;
    case Kind::String:
      if (!item.is_string())
        return err("TypeError: 'in <string>' requires string as left operand, not ", type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
      for (const Value& x : container.list().items) {
        auto e = equals(x, item);
        if (!e) return e;
        if (*e) return true;
      }
      return false;
    case Kind::Dict:
      if (!container.dict().find(item)) {
        if (!item.is_string() && !item.is_number() && !item.is_none() &&
            !(item.is_list() && item.seq_kind() == SeqKind::Tuple))
          return err("TypeError: unhashable type: '", type_name(item), "'");
        return false;
      }
      return true;
    default:
      return err("TypeError: argument of type '", type_name(container), "' is not iterable");
  }
}

Result<bool> compare_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "==" || op == "!=") {
    auto e = equals(a, b);
    if (!e) return e;
    return op == "==" ? *e : !*e;
  }
  if (op == "in" || op == "notin") {
    auto c = contains(b, a);
    if (!c) return c;
    return op == "in" ? *c : !*c;
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  auto c = compare(a, b);
  if (!c) {
    if (op == "<") return c.error();
    return err("TypeError: '", op, "' not supported between instances of '", type_name(a), "' and '",
               type_name(b), "'");
  }
  if (op == "<") return *c < 0;
  if (op == "<=") return *c <= 0;
  if (op == ">") return *c > 0;
  return *c >= 0;  // >=
}

}  // namespace kt::jinja
