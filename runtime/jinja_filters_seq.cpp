// Built-in filters on sequences and mappings, as jinja2 3.1.2 defines them
// (filters.py). map/select/reject/selectattr/rejectattr/items/unique/batch
// return generators, as in jinja2: always true, no len(), not
// JSON-serializable.
#include <algorithm>
#include <cstdlib>

#include "runtime/jinja_filter_args.h"
#include "runtime/jinja_text.h"

namespace kt::jinja {
namespace {

using namespace filter_args;

// jinja2's make_attrgetter: "a.b.0" walks getitem (item, then attribute).
Result<Value> attr_path(Interp& in, Value item, const Value& attribute, const std::optional<Value>& dflt) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    for (const std::string& p : text::split(attribute.str(), std::string("."), -1)) {
      bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
      parts.push_back(digits && p.size() < 18 ? Value::integer(std::atoll(p.c_str())) : Value::string(p));
    }
  } else if (!attribute.is_none()) {
    parts.push_back(attribute);
  }
  for (const Value& part : parts) {
    auto next = in.get_item(item, part);
    if (!next) return next;
    item = std::move(*next);
    if (dflt && item.is_undefined()) item = *dflt;
  }
  return item;
}

Value ignore_case(const Value& v) { return v.is_string() ? Value::string(text::lower(v.str())) : v; }
// ---- sequences ----

Result<Value> f_length(Interp&, const Value& v, CallArgs&) {
  auto n = length(v);
  if (!n) return n.error();
  return Value::integer(*n);
}

Result<Value> f_list(Interp&, const Value& v, CallArgs&) {
  auto items = iterate(v);
  if (!items) return items.error();
  return Value::list(std::move(*items));
}

Result<Value> f_first(Interp&, const Value& v, CallArgs&) {
  auto items = iterate(v);
  if (!items) return items.error();
  if (items->empty()) return Value::undefined("No first item, sequence was empty.");
  return (*items)[0];
}

Result<Value> f_last(Interp&, const Value& v, CallArgs&) {
  if (v.is_list() && v.seq_kind() == SeqKind::Generator)
    return err("TypeError: 'generator' object is not reversible");
  auto items = iterate(v);
  if (!items) return items.error();
  if (items->empty()) return Value::undefined("No last item, sequence was empty.");
  return items->back();
}

Result<Value> f_reverse(Interp&, const Value& v, CallArgs&) {
  if (v.is_string()) return Value::string(text::slice(v.str(), std::nullopt, std::nullopt, -1));
  auto items = iterate(v);
  if (!items) return items.error();
  std::reverse(items->begin(), items->end());
  if (v.is_list() && v.seq_kind() != SeqKind::Generator) return Value::list(std::move(*items));
  return generator(std::move(*items));  // reversed(dict) is an iterator
}

Result<Value> f_join(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"d", "attribute"}, 0, "join");
  if (!b) return b.error();
  auto sep = soft_str(arg_or(*b, 0, Value::string("")));
  if (!sep) return sep.error();
  auto items = iterate(v);
  if (!items) return items.error();
  std::string out;
  for (size_t k = 0; k < items->size(); ++k) {
    Value item = (*items)[k];
    if ((*b)[1]) {
      auto x = attr_path(in, item, *(*b)[1], std::nullopt);
      if (!x) return x.error();
      item = *x;
    }
    auto s = soft_str(item);
    if (!s) return s.error();
    if (k) out += *sep;
    out += *s;
    KT_TRY(in.check_size(out.size()));
    KT_TRY(in.step(s->size() / kBytesPerStep));
  }
  return Value::string(std::move(out));
}

Result<Value> f_default(Interp&, const Value& v, CallArgs& a) {
  auto b = bind(a, {"default_value", "boolean"}, 0, "default");
  if (!b) return b.error();
  if (v.is_undefined() || (flag(*b, 1) && !truthy(v))) return arg_or(*b, 0, Value::string(""));
  return v;
}

Result<Value> f_items(Interp&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) return err("TypeError: Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [k, x] : v.dict().items()) pairs.push_back(Value::list({k, x}, SeqKind::Tuple));
  return generator(std::move(pairs));
}

Result<Value> f_map(Interp& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  if (!truthy(v)) return generator({});
  auto items = iterate(v);
  if (!items) return items.error();
  if (a.pos.empty()) {
    const Value *attribute = nullptr, *dflt = nullptr;
    for (const auto& [k, x] : a.kw) {
      if (k == "attribute") attribute = &x;
      else if (k == "default") dflt = &x;
      else return err("FilterArgumentError: Unexpected keyword argument '", k, "'");
    }
    if (!attribute) return err("FilterArgumentError: map requires a filter argument");
    std::optional<Value> d;
    if (dflt && !dflt->is_none()) d = *dflt;
    for (const Value& item : *items) {
      auto x = attr_path(in, item, *attribute, d);
      if (!x) return x.error();
      out.push_back(std::move(*x));
    }
    return generator(std::move(out));
  }
  if (!a.pos[0].is_string()) return err("FilterArgumentError: map filter name must be a string");
  std::string name = a.pos[0].str();
  CallArgs rest{std::vector<Value>(a.pos.begin() + 1, a.pos.end()), a.kw};
  for (const Value& item : *items) {
    KT_TRY(in.step());
    CallArgs copy = rest;
    auto x = in.apply_filter(name, item, copy);
    if (!x) return x.error();
    out.push_back(std::move(*x));
  }
  return generator(std::move(out));
}

// select/reject/selectattr/rejectattr share jinja2's select_or_reject.
Result<Value> select_or_reject(Interp& in, const Value& v, CallArgs& a, bool keep_if, bool by_attr) {
  if (!truthy(v)) return generator({});
  auto items = iterate(v);
  if (!items) return items.error();
  size_t off = 0;
  Value attribute;
  if (by_attr) {
    if (a.pos.empty()) return err("FilterArgumentError: Missing parameter for attribute name");
    attribute = a.pos[0];
    off = 1;
  }
  std::optional<std::string> test;
  if (a.pos.size() > off) {
    if (!a.pos[off].is_string()) return err("TypeError: test name must be a string");
    test = a.pos[off].str();
  }
  CallArgs rest{std::vector<Value>(a.pos.begin() + long(std::min(a.pos.size(), off + 1)), a.pos.end()), a.kw};
  std::vector<Value> out;
  for (const Value& item : *items) {
    KT_TRY(in.step());
    Value probe = item;
    if (by_attr) {
      auto x = attr_path(in, item, attribute, std::nullopt);
      if (!x) return x.error();
      probe = *x;
    }
    bool pass = truthy(probe);
    if (test) {
      CallArgs copy = rest;
      auto t = in.apply_test(*test, probe, copy);
      if (!t) return t.error();
      pass = *t;
    }
    if (pass == keep_if) out.push_back(item);
  }
  return generator(std::move(out));
}

Result<Value> f_select(Interp& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, false); }
Result<Value> f_reject(Interp& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, false); }
Result<Value> f_selectattr(Interp& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, true); }
Result<Value> f_rejectattr(Interp& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, true); }

// Sorts items by keys (computed once), stably, with Python's <.
Status sort_by_keys(std::vector<Value>& items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  Status failed = ok_status();
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    auto c = compare(keys[x], keys[y]);
    if (!c) failed = c.error();
    return c && (reverse ? *c > 0 : *c < 0);
  });
  KT_TRY(failed);
  std::vector<Value> sorted;
  for (size_t k : order) sorted.push_back(items[k]);
  items = std::move(sorted);
  return ok_status();
}

Result<std::vector<Value>> sort_keys_of(Interp& in, const std::vector<Value>& items, const Value& attribute,
                                        bool case_sensitive) {
  std::vector<Value> keys;
  for (const Value& item : items) {
    KT_TRY(in.step());
    auto k = attr_path(in, item, attribute, std::nullopt);
    if (!k) return k.error();
    keys.push_back(case_sensitive ? *k : ignore_case(*k));
  }
  return keys;
}

Result<Value> f_sort(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"reverse", "case_sensitive", "attribute"}, 0, "sort");
  if (!b) return b.error();
  auto items = iterate(v);
  if (!items) return items.error();
  auto keys = sort_keys_of(in, *items, arg_or(*b, 2, Value::none()), flag(*b, 1));
  if (!keys) return keys.error();
  KT_TRY(sort_by_keys(*items, *keys, flag(*b, 0)));
  return Value::list(std::move(*items));
}

Result<Value> f_dictsort(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"case_sensitive", "by", "reverse"}, 0, "dictsort");
  if (!b) return b.error();
  if (!v.is_dict()) return err("TypeError: dictsort expects a mapping");
  Value by = arg_or(*b, 1, Value::string("key"));
  if (!by.is_string() || (by.str() != "key" && by.str() != "value"))
    return err("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
  std::vector<Value> pairs, keys;
  for (const auto& [k, x] : v.dict().items()) {
    pairs.push_back(Value::list({k, x}, SeqKind::Tuple));
    const Value& key = by.str() == "key" ? k : x;
    keys.push_back(flag(*b, 0) ? key : ignore_case(key));
  }
  KT_TRY(sort_by_keys(pairs, keys, flag(*b, 2)));
  return Value::list(std::move(pairs));
}

Result<Value> f_unique(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"case_sensitive", "attribute"}, 0, "unique");
  if (!b) return b.error();
  auto items = iterate(v);
  if (!items) return items.error();
  auto keys = sort_keys_of(in, *items, arg_or(*b, 1, Value::none()), flag(*b, 0));
  if (!keys) return keys.error();
  DictData seen;
  std::vector<Value> out;
  for (size_t k = 0; k < items->size(); ++k) {
    if (seen.find((*keys)[k])) continue;
    KT_TRY(seen.set((*keys)[k], Value::none()));
    out.push_back((*items)[k]);
  }
  return generator(std::move(out));
}

Result<Value> min_max(Interp& in, const Value& v, CallArgs& a, bool want_max) {
  auto b = bind(a, {"case_sensitive", "attribute"}, 0, want_max ? "max" : "min");
  if (!b) return b.error();
  auto items = iterate(v);
  if (!items) return items.error();
  if (items->empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto keys = sort_keys_of(in, *items, arg_or(*b, 1, Value::none()), flag(*b, 0));
  if (!keys) return keys.error();
  size_t best = 0;
  for (size_t k = 1; k < items->size(); ++k) {
    auto c = compare((*keys)[k], (*keys)[best]);
    if (!c) return c.error();
    if (want_max ? *c > 0 : *c < 0) best = k;
  }
  return (*items)[best];
}

Result<Value> f_min(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }
Result<Value> f_max(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }

Result<Value> f_sum(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"attribute", "start"}, 0, "sum");
  if (!b) return b.error();
  auto items = iterate(v);
  if (!items) return items.error();
  Value total = arg_or(*b, 1, Value::integer(0));
  for (const Value& item : *items) {
    Value x = item;
    if ((*b)[0]) {
      auto r = attr_path(in, item, *(*b)[0], std::nullopt);
      if (!r) return r.error();
      x = *r;
    }
    auto s = binary_op(in, "+", total, x);
    if (!s) return s.error();
    total = *s;
  }
  return total;
}

Result<Value> f_attr(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"name"}, 1, "attr");
  if (!b) return b.error();
  if (!(*b)[0]->is_string()) return err("TypeError: attribute name must be a string");
  return in.get_attr(v, (*b)[0]->str());
}

Result<Value> f_batch(Interp& in, const Value& v, CallArgs& a) {
  auto b = bind(a, {"linecount", "fill_with"}, 1, "batch");
  if (!b) return b.error();
  if (!(*b)[0]->is_integral() || (*b)[0]->as_int() <= 0) return err("ValueError: batch size must be a positive int");
  size_t n = size_t((*b)[0]->as_int());
  auto items = iterate(v);
  if (!items) return items.error();
  std::vector<Value> out, cur;
  for (const Value& x : *items) {
    KT_TRY(in.step());
    cur.push_back(x);
    if (cur.size() == n) out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if ((*b)[1] && !(*b)[1]->is_none())
      while (cur.size() < n) cur.push_back(*(*b)[1]);
    out.push_back(Value::list(std::move(cur)));
  }
  return generator(std::move(out));
}

constexpr FilterEntry kSeqFilters[] = {
    {"attr", f_attr}, {"batch", f_batch}, {"count", f_length},
    {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort},
    {"first", f_first}, {"items", f_items}, {"join", f_join},
    {"last", f_last}, {"length", f_length}, {"list", f_list},
    {"map", f_map}, {"max", f_max}, {"min", f_min},
    {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"reverse", f_reverse},
    {"select", f_select}, {"selectattr", f_selectattr}, {"sort", f_sort},
    {"sum", f_sum}, {"unique", f_unique},
};

}  // namespace

std::span<const FilterEntry> sequence_filters() { return kSeqFilters; }

}  // namespace kt::jinja
