// Python str semantics over UTF-8 bytes, for the chat-template interpreter.
// Templates index, slice, strip and split strings by code point the way
// Python does (transformers renders with Python's jinja2), so "héllo"[1:3] is
// "él" and strip() removes U+3000. Invalid UTF-8 never fails: a stray byte
// decodes as one code point of its own value and re-encodes as that byte, so
// any byte string survives every operation unchanged where Python would keep it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kt::jinja::text {

// Decodes the code point at s[i] and advances i past it.
uint32_t decode(std::string_view s, size_t& i);
void append_utf8(std::string& out, uint32_t cp);
std::vector<uint32_t> code_points(std::string_view s);
std::string encode(const uint32_t* cps, size_t n);
bool is_ascii(std::string_view s);
size_t length(std::string_view s);

// Python's str.isspace() for one code point (Unicode White_Space plus \x1c-\x1f).
bool is_space(uint32_t cp);
// Python's str.isprintable() for one code point (what repr() leaves unescaped).
bool is_printable(uint32_t cp);
// Python's str.splitlines() line boundaries.
bool is_line_break(uint32_t cp);

// Python slice semantics: the selected indices of a sequence of length len.
// step must not be 0.
std::vector<int64_t> slice_indices(int64_t len, std::optional<int64_t> start,
                                   std::optional<int64_t> stop, int64_t step);
std::string slice(std::string_view s, std::optional<int64_t> start,
                  std::optional<int64_t> stop, int64_t step);
// The code point at index (negative counts from the end); nullopt when out of range.
std::optional<std::string> char_at(std::string_view s, int64_t index);

// str.strip/lstrip/rstrip: without chars, Unicode whitespace; with chars, any of them.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / str.rsplit: sep nullopt splits on runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count);
// The size replace() would return, computed without building it.
size_t replaced_size(std::string_view s, std::string_view old, std::string_view with,
                     int64_t count);
// Code point index of the first/last occurrence, or -1.
int64_t find(std::string_view s, std::string_view sub, bool last);
int64_t count(std::string_view s, std::string_view sub);

// Case mapping covers ASCII only; other code points pass through unchanged.
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize()
std::string title(std::string_view s);       // jinja's title filter

// Python repr() of a str: quotes chosen as Python does, non-printables escaped.
std::string repr(std::string_view s);
// HTML escaping as markupsafe.escape does (& < > ' ").
std::string html_escape(std::string_view s);

}  // namespace kt::jinja::text
