// Python str semantics over UTF-8 (see jinja_text.h).
#include "runtime/jinja_text.h"

#include <algorithm>

namespace kt::jinja::text {
namespace {

// Invalid bytes decode to U+DC80..U+DCFF (Python's surrogateescape), so they
// re-encode to the very same byte.
constexpr uint32_t kEscapedByteBase = 0xDC00;

bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

bool in_chars(uint32_t cp, const std::vector<uint32_t>& set) {
  return std::find(set.begin(), set.end(), cp) != set.end();
}

char ascii_upper(char c) { return (c >= 'a' && c <= 'z') ? char(c - 32) : c; }
char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c + 32) : c; }
uint32_t cp_upper(uint32_t c) { return (c >= 'a' && c <= 'z') ? c - 32 : c; }
uint32_t cp_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

}  // namespace

uint32_t decode(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  unsigned char b0 = p[i];
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  size_t len = 0;
  uint32_t cp = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
  }
  bool ok = len != 0 && i + len <= n && p[i + 1] >= lo && p[i + 1] <= hi;
  for (size_t k = 1; ok && k < len; ++k) {
    if (!is_cont(p[i + k])) ok = false;
    cp = (cp << 6) | (p[i + k] & 0x3F);
  }
  if (!ok) {
    ++i;
    return kEscapedByteBase + b0;
  }
  i += len;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp >= kEscapedByteBase + 0x80 && cp <= kEscapedByteBase + 0xFF) {
    out += char(cp - kEscapedByteBase);
  } else if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) cps.push_back(decode(s, i));
  return cps;
}

std::string encode(const uint32_t* cps, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t k = 0; k < n; ++k) append_utf8(out, cps[k]);
  return out;
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) decode(s, i);
  return n;
}

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_line_break(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool is_printable(uint32_t c) {
  // Not printable: categories Cc, Cf, Cs, Co, Zl, Zp and Zs other than ' '.
  // (Unassigned code points are not tracked.)
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F) return false;
  if (c == 0x890 || c == 0x891 || c == 0x8E2 || c == 0x1680 || c == 0x180E) return false;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
  if ((c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
  if (c == 0xFFFE || c == 0xFFFF || c == 0x110BD || c == 0x110CD) return false;
  if ((c >= 0x13430 && c <= 0x13438) || (c >= 0x1BCA0 && c <= 0x1BCA3)) return false;
  if ((c >= 0x1D173 && c <= 0x1D17A) || c == 0xE0001 || (c >= 0xE0020 && c <= 0xE007F))
    return false;
  return c < 0xF0000;
}

std::vector<int64_t> slice_indices(int64_t len, std::optional<int64_t> start,
                                   std::optional<int64_t> stop, int64_t step) {
  // CPython's PySlice_AdjustIndices.
  int64_t lo, hi;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt, int64_t below, int64_t above) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = below;
    } else if (x >= len) {
      x = above;
    }
    return x;
  };
  std::vector<int64_t> out;
  if (step > 0) {
    lo = clamp(start, 0, 0, len);
    hi = clamp(stop, len, 0, len);
    for (int64_t i = lo; i < hi; i += step) out.push_back(i);
  } else {
    lo = clamp(start, len - 1, -1, len - 1);
    hi = clamp(stop, -1, -1, len - 1);
    for (int64_t i = lo; i > hi; i += step) out.push_back(i);
  }
  return out;
}

std::string slice(std::string_view s, std::optional<int64_t> start, std::optional<int64_t> stop,
                  int64_t step) {
  if (is_ascii(s)) {
    std::string out;
    for (int64_t i : slice_indices(int64_t(s.size()), start, stop, step)) out += s[size_t(i)];
    return out;
  }
  auto cps = code_points(s);
  std::string out;
  for (int64_t i : slice_indices(int64_t(cps.size()), start, stop, step))
    append_utf8(out, cps[size_t(i)]);
  return out;
}

std::optional<std::string> char_at(std::string_view s, int64_t index) {
  auto cps = code_points(s);
  int64_t n = int64_t(cps.size());
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  return encode(&cps[size_t(index)], 1);
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  auto cps = code_points(s);
  std::vector<uint32_t> set;
  if (chars) set = code_points(*chars);
  auto strippable = [&](uint32_t c) { return chars ? in_chars(c, set) : is_space(c); };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strippable(cps[b])) ++b;
  if (right)
    while (e > b && strippable(cps[e - 1])) --e;
  return encode(cps.data() + b, e - b);
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  auto cps = code_points(s);
  size_t i = 0, n = cps.size();
  while (true) {
    while (i < n && is_space(cps[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
      size_t e = n;  // the remainder keeps its trailing whitespace
      out.push_back(encode(cps.data() + i, e - i));
      break;
    }
    size_t b = i;
    while (i < n && !is_space(cps[i])) ++i;
    out.push_back(encode(cps.data() + b, i - b));
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  auto cps = code_points(s);
  size_t i = cps.size();
  while (true) {
    while (i > 0 && is_space(cps[i - 1])) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
      out.push_back(encode(cps.data(), i));
      break;
    }
    size_t e = i;
    while (i > 0 && !is_space(cps[i - 1])) --i;
    out.push_back(encode(cps.data() + i, e - i));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  auto cps = code_points(s);
  size_t b = 0, i = 0, n = cps.size();
  while (i < n) {
    if (!is_line_break(cps[i])) {
      ++i;
      continue;
    }
    size_t eol = i + ((cps[i] == '\r' && i + 1 < n && cps[i + 1] == '\n') ? 2 : 1);
    out.push_back(encode(cps.data() + b, (keepends ? eol : i) - b));
    b = i = eol;
  }
  if (b < n) out.push_back(encode(cps.data() + b, n - b));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    auto cps = code_points(s);
    int64_t done = 0;
    for (uint32_t c : cps) {
      if (count < 0 || done < count) out += with, ++done;
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(with);
    pos = f + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

size_t replaced_size(std::string_view s, std::string_view old, std::string_view with,
                     int64_t count) {
  int64_t hits = old.empty() ? int64_t(length(s)) + 1 : text::count(s, old);
  if (count >= 0) hits = std::min(hits, count);
  // Saturate instead of overflowing: the caller only compares to a limit.
  double size = double(s.size()) + double(hits) * (double(with.size()) - double(old.size()));
  return size >= 1e18 ? size_t(1e18) : size_t(size);
}

int64_t find(std::string_view s, std::string_view sub, bool last) {
  size_t f = last ? s.rfind(sub) : s.find(sub);
  if (f == std::string_view::npos) return -1;
  return int64_t(length(s.substr(0, f)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return int64_t(length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_upper(c);
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = ascii_upper(out[0]);
  return out;
}

std::string title(std::string_view s) {
  // jinja2's do_title: words begin after runs of [-\s({[<]; each word gets its
  // first code point upper-cased and the rest lower-cased.
  auto cps = code_points(s);
  auto is_sep = [](uint32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c);
  };
  std::string out;
  bool word_start = true;
  for (uint32_t c : cps) {
    if (is_sep(c)) {
      append_utf8(out, c);
      word_start = true;
    } else {
      append_utf8(out, word_start ? cp_upper(c) : cp_lower(c));
      word_start = false;
    }
  }
  return out;
}

std::string repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < s.size();) {
    uint32_t c = decode(s, i);
    if (c == uint32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (is_printable(c)) {
      append_utf8(out, c);
    } else {
      int digits = c < 0x100 ? 2 : c < 0x10000 ? 4 : 8;
      out += c < 0x100 ? "\\x" : c < 0x10000 ? "\\u" : "\\U";
      for (int k = digits - 1; k >= 0; --k) out += hex[(c >> (4 * k)) & 0xF];
    }
  }
  out += quote;
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace kt::jinja::text
