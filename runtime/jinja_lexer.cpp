// Tokenizer of the chat-template interpreter. It follows jinja2 3.1's lexer
// rule for rule (lexer.py: tokeniter), because whitespace control decides the
// rendered bytes: with trim_blocks the newline after a block or comment tag is
// dropped; with lstrip_blocks spaces and tabs before a block or comment tag are
// dropped when only whitespace precedes it on its line; '-' strips all
// whitespace (Unicode too) on its side; '+' keeps it.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include "runtime/jinja_ast.h"
#include "runtime/jinja_text.h"

namespace kt::jinja {

SourceMap::SourceMap(std::string name_, std::string_view text) : name(std::move(name_)) {
  line_starts.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') line_starts.push_back(uint32_t(i + 1));
}

std::string SourceMap::where(uint32_t pos) const {
  auto it = std::upper_bound(line_starts.begin(), line_starts.end(), pos);
  size_t line = size_t(it - line_starts.begin());
  size_t col = pos - line_starts[line - 1] + 1;
  return name + ":" + std::to_string(line) + ":" + std::to_string(col);
}

std::string normalize_source(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(unsigned char c) { return c == '_' || std::isalpha(c) || c >= 0x80; }
bool is_name_char(unsigned char c) { return is_name_start(c) || is_digit(char(c)); }

class Lexer {
 public:
  Lexer(const std::string& src, const SourceMap& map) : s_(src), map_(map) {}

  Result<std::vector<Token>> run() {
    while (pos_ < s_.size()) {
      size_t start = find_tag_start(pos_);
      if (start == std::string::npos) {
        emit_data(s_.substr(pos_));
        pos_ = s_.size();
        break;
      }
      std::string text = s_.substr(pos_, start - pos_);
      char type = s_[start + 1];  // '%', '{' or '#'
      size_t after = start + 2;
      char sign = (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) ? s_[after] : 0;
      size_t raw_end = type == '%' ? match_raw_begin(start) : 0;
      strip_before_tag(text, sign, type != '{');
      emit_data(std::move(text));
      line_starting_ = false;
      pos_ = after + (sign ? 1 : 0);
      if (raw_end) {
        pos_ = raw_end;
        line_starting_ = s_[raw_end - 1] == '\n';
        KT_TRY(lex_raw_body(start));
      } else if (type == '#') {
        KT_TRY(lex_comment(start));
      } else {
        tokens_.push_back(Token{type == '%' ? Tok::BlockBegin : Tok::VarBegin, uint32_t(start), {}});
        KT_TRY(lex_tag(type == '%'));
      }
    }
    tokens_.push_back(Token{Tok::Eof, uint32_t(s_.size()), {}});
    return std::move(tokens_);
  }

 private:
  Error fail(size_t pos, const std::string& msg) const {
    return err(map_.where(uint32_t(pos)), ": syntax error: ", msg);
  }

  size_t find_tag_start(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos; i = s_.find('{', i + 1))
      if (i + 1 < s_.size() && (s_[i + 1] == '%' || s_[i + 1] == '{' || s_[i + 1] == '#'))
        return i;
    return std::string::npos;
  }

  // Whitespace (Python's \s) run starting at i; returns its end.
  size_t skip_space(size_t i) const {
    while (i < s_.size()) {
      size_t j = i;
      if (!text::is_space(text::decode(s_, j))) break;
      i = j;
    }
    return i;
  }

  // jinja2's OptionalLStrip: '-' strips all trailing whitespace of the text;
  // otherwise lstrip_blocks removes the whitespace between the last newline
  // (or the start of a line) and a block/comment tag.
  void strip_before_tag(std::string& text, char sign, bool lstrip_applies) {
    if (sign == '-') {
      text = text::strip(text, std::nullopt, false, true);
      return;
    }
    if (sign == '+' || !lstrip_applies) return;
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting_) return;
    if (l_pos < text.size() && skip_space_in(text, l_pos) == text.size()) text.resize(l_pos);
  }

  static size_t skip_space_in(const std::string& t, size_t i) {
    while (i < t.size()) {
      size_t j = i;
      if (!text::is_space(text::decode(t, j))) break;
      i = j;
    }
    return i;
  }

  void emit_data(std::string text) {
    if (!text.empty()) tokens_.push_back(Token{Tok::Data, uint32_t(pos_), std::move(text)});
  }

  // Matches `{%[-+]?\s*raw\s*(-%}\s*|%})` at start; returns the end or 0.
  size_t match_raw_begin(size_t start) const {
    size_t i = start + 2;
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    i = skip_space(i);
    if (s_.compare(i, 3, "raw") != 0) return 0;
    i = skip_space(i + 3);
    if (s_.compare(i, 3, "-%}") == 0) return skip_space(i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2;
    return 0;
  }

  Status lex_raw_body(size_t start) {
    for (size_t i = find_tag_start(pos_); i != std::string::npos; i = find_tag_start(i + 1)) {
      if (s_[i + 1] != '%') continue;
      size_t j = i + 2;
      char sign = (j < s_.size() && (s_[j] == '-' || s_[j] == '+')) ? s_[j] : 0;
      if (sign) ++j;
      j = skip_space(j);
      if (s_.compare(j, 6, "endraw") != 0) continue;
      j = skip_space(j + 6);
      size_t end = match_block_end(j);
      if (!end) continue;
      std::string body = s_.substr(pos_, i - pos_);
      strip_before_tag(body, sign, true);
      emit_data(std::move(body));
      line_starting_ = s_[end - 1] == '\n';
      pos_ = end;
      return ok_status();
    }
    return fail(start, "missing end of raw directive");
  }

  // `+%}` | `-%}\s*` | `%}\n?` at i; returns the end or 0.
  size_t match_block_end(size_t i) const {
    if (s_.compare(i, 3, "+%}") == 0) return i + 3;
    if (s_.compare(i, 3, "-%}") == 0) return skip_space(i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2 + (i + 2 < s_.size() && s_[i + 2] == '\n');
    return 0;
  }

  Status lex_comment(size_t start) {
    for (size_t i = pos_; i < s_.size(); ++i) {
      size_t end = 0;
      if (s_.compare(i, 3, "+#}") == 0)
        end = i + 3;
      else if (s_.compare(i, 3, "-#}") == 0)
        end = skip_space(i + 3);
      else if (s_.compare(i, 2, "#}") == 0)
        end = i + 2 + (i + 2 < s_.size() && s_[i + 2] == '\n');
      if (end) {
        line_starting_ = s_[end - 1] == '\n';
        pos_ = end;
        return ok_status();
      }
    }
    return fail(start, "missing end of comment tag");
  }

  Status lex_tag(bool block) {
    std::vector<char> balance;
    size_t begin = tokens_.back().pos;
    while (true) {
      if (pos_ >= s_.size())
        return fail(begin, block ? "unexpected end of template inside a {% %} tag"
                                 : "unexpected end of template inside a {{ }} tag");
      if (balance.empty()) {
        size_t end = 0;
        if (block) {
          end = match_block_end(pos_);
        } else if (s_.compare(pos_, 3, "-}}") == 0) {
          end = skip_space(pos_ + 3);
        } else if (s_.compare(pos_, 2, "}}") == 0) {
          end = pos_ + 2;
        }
        if (end) {
          tokens_.push_back(Token{block ? Tok::BlockEnd : Tok::VarEnd, uint32_t(pos_), {}});
          line_starting_ = s_[end - 1] == '\n';
          pos_ = end;
          return ok_status();
        }
      }
      size_t ws = skip_space(pos_);
      if (ws != pos_) {
        pos_ = ws;
        continue;
      }
      KT_TRY(lex_token(balance));
    }
  }

  // (\d+_)*\d+ : digits with single underscores between them.
  size_t digits(size_t i) const {
    if (i >= s_.size() || !is_digit(s_[i])) return 0;
    while (i < s_.size() && is_digit(s_[i])) {
      ++i;
      if (i + 1 < s_.size() && s_[i] == '_' && is_digit(s_[i + 1])) ++i;
    }
    return i;
  }

  size_t match_exponent(size_t i) const {
    if (i >= s_.size() || (s_[i] != 'e' && s_[i] != 'E')) return 0;
    ++i;
    if (i < s_.size() && (s_[i] == '+' || s_[i] == '-')) ++i;
    return digits(i);
  }

  Status lex_number(size_t start) {
    size_t int_end = digits(start);
    size_t end = 0;
    if (start == 0 || s_[start - 1] != '.') {  // float_re's (?<!\.)
      size_t frac_end = (int_end < s_.size() && s_[int_end] == '.') ? digits(int_end + 1) : 0;
      size_t exp_end = match_exponent(frac_end ? frac_end : int_end);
      end = exp_end ? exp_end : frac_end;
    }
    auto clean = [&](size_t b, size_t e) {
      std::string t = s_.substr(b, e - b);
      t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
      return t;
    };
    if (end) {
      std::string t = clean(start, end);
      double f = 0;
      std::from_chars(t.data(), t.data() + t.size(), f);
      tokens_.push_back(Token{Tok::Float, uint32_t(start), {}, 0, f});
      pos_ = end;
      return ok_status();
    }
    int base = 10;
    size_t b = start;
    if (s_[start] == '0' && start + 1 < s_.size()) {
      char p = char(std::tolower(static_cast<unsigned char>(s_[start + 1])));
      base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 10;
      if (base != 10) b = start + 2;
    }
    size_t e = b;
    auto ok_digit = [&](char c) {
      c = char(std::tolower(static_cast<unsigned char>(c)));
      if (base == 16) return is_digit(c) || (c >= 'a' && c <= 'f');
      return c >= '0' && c < char('0' + base);
    };
    while (e < s_.size() && (ok_digit(s_[e]) || (s_[e] == '_' && e + 1 < s_.size() && ok_digit(s_[e + 1]))))
      ++e;
    if (base == 10) {
      // [1-9](_?\d)* or 0(_?0)*
      if (s_[start] == '0') {
        e = start + 1;
        while (e < s_.size() && (s_[e] == '0' || (s_[e] == '_' && e + 1 < s_.size() && s_[e + 1] == '0')))
          ++e;
      }
    } else if (e == b) {
      return fail(start, "invalid integer literal");
    }
    std::string t = clean(b, e);
    int64_t v = 0;
    auto res = std::from_chars(t.data(), t.data() + t.size(), v, base);
    if (res.ec != std::errc()) return fail(start, "integer literal out of range");
    tokens_.push_back(Token{Tok::Int, uint32_t(start), {}, v, 0});
    pos_ = e;
    return ok_status();
  }

  Status lex_string(size_t start) {
    char q = s_[start];
    size_t i = start + 1;
    while (i < s_.size() && s_[i] != q) i += (s_[i] == '\\') ? 2 : 1;
    if (i >= s_.size()) return fail(start, "unterminated string literal");
    auto value = unescape(s_.substr(start + 1, i - start - 1), start);
    if (!value) return value.error();
    tokens_.push_back(Token{Tok::String, uint32_t(start), std::move(*value)});
    pos_ = i + 1;
    return ok_status();
  }

  static std::optional<uint32_t> read_hex(const std::string& in, size_t from, size_t n) {
    uint32_t v = 0;
    for (size_t k = from; k < from + n; ++k) {
      if (k >= in.size()) return std::nullopt;
      char h = char(std::tolower(static_cast<unsigned char>(in[k])));
      if (!is_digit(h) && !(h >= 'a' && h <= 'f')) return std::nullopt;
      v = v * 16 + uint32_t(is_digit(h) ? h - '0' : h - 'a' + 10);
    }
    return v;
  }

  // Python's "unicode-escape" codec, which jinja2 applies to string literals.
  Result<std::string> unescape(const std::string& in, size_t at) const {
    std::string out;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] != '\\' || i + 1 >= in.size()) {
        out += in[i];
        continue;
      }
      char c = in[++i];
      switch (c) {
        case '\n': break;  // line continuation
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
          auto cp = read_hex(in, i + 1, n);
          if (!cp) return fail(at, std::string("truncated \\") + c + " escape");
          i += n;
          if (*cp > 0x10FFFF) return fail(at, "illegal Unicode character");
          // Join a UTF-16 surrogate pair written as two \u escapes.
          if (*cp >= 0xD800 && *cp < 0xDC00 && in.compare(i + 1, 2, "\\u") == 0) {
            auto lo = read_hex(in, i + 3, 4);
            if (lo && *lo >= 0xDC00 && *lo < 0xE000) {
              *cp = 0x10000 + ((*cp - 0xD800) << 10) + (*lo - 0xDC00);
              i += 6;
            }
          }
          text::append_utf8(out, *cp);
          break;
        }
        case 'N': return fail(at, "\\N{...} escapes are not supported");
        default:
          if (c >= '0' && c <= '7') {
            uint32_t cp = uint32_t(c - '0');
            for (int k = 0; k < 2 && i + 1 < in.size() && in[i + 1] >= '0' && in[i + 1] <= '7'; ++k)
              cp = cp * 8 + uint32_t(in[++i] - '0');
            text::append_utf8(out, cp);
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    return out;
  }

  Status lex_token(std::vector<char>& balance) {
    size_t start = pos_;
    char c = s_[start];
    if (is_digit(c)) return lex_number(start);
    if (is_name_start(static_cast<unsigned char>(c))) {
      size_t e = start;
      while (e < s_.size()) {
        if (static_cast<unsigned char>(s_[e]) >= 0x80) {
          size_t j = e;
          if (text::is_space(text::decode(s_, j))) break;
          e = j;
        } else if (is_name_char(static_cast<unsigned char>(s_[e]))) {
          ++e;
        } else {
          break;
        }
      }
      tokens_.push_back(Token{Tok::Name, uint32_t(start), s_.substr(start, e - start)});
      pos_ = e;
      return ok_status();
    }
    if (c == '\'' || c == '"') return lex_string(start);
    static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two) {
      if (s_.compare(start, 2, op) == 0) {
        tokens_.push_back(Token{Tok::Op, uint32_t(start), op});
        pos_ = start + 2;
        return ok_status();
      }
    }
    if (!std::strchr("+-/*%~[](){}><=.:|,;", c) || c == 0)
      return fail(start, std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) return fail(start, std::string("unexpected '") + c + "'");
      if (balance.back() != c)
        return fail(start, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    tokens_.push_back(Token{Tok::Op, uint32_t(start), std::string(1, c)});
    pos_ = start + 1;
    return ok_status();
  }

  const std::string& s_;
  const SourceMap& map_;
  size_t pos_ = 0;
  bool line_starting_ = true;  // the previous match ended with a newline
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> tokenize(const std::string& source, const SourceMap& map) {
  return Lexer(source, map).run();
}

}  // namespace kt::jinja
