// Incremental detokenization and stop strings (text_stream.h).
#include "runtime/text_stream.h"

#include <algorithm>

namespace kt {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

// ---- Utf8Assembler ----------------------------------------------------------

// The WHATWG UTF-8 decoder (encoding.spec.whatwg.org, "UTF-8 decoder"): the
// bounds on the first continuation byte rule out overlongs (E0 80..9F,
// F0 80..8F), surrogates (ED A0..BF) and code points past U+10FFFF (F4 90..).
void Utf8Assembler::feed(std::string_view bytes, std::string* out) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const uint8_t b = uint8_t(bytes[i]);
    if (need_ > 0) {
      if (b < lower_ || b > upper_) {
        // The held bytes are one maximal invalid subpart; b starts afresh.
        need_ = 0;
        held_len_ = 0;
        lower_ = 0x80;
        upper_ = 0xBF;
        out->append(kReplacement);
      } else {
        lower_ = 0x80;
        upper_ = 0xBF;
        held_[held_len_++] = char(b);
        if (--need_ == 0) {
          out->append(held_, held_len_);
          held_len_ = 0;
        }
        continue;
      }
    }
    if (b < 0x80) {
      out->push_back(char(b));
    } else if (b >= 0xC2 && b <= 0xDF) {
      need_ = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      if (b == 0xE0) lower_ = 0xA0;
      if (b == 0xED) upper_ = 0x9F;
      need_ = 2;
    } else if (b >= 0xF0 && b <= 0xF4) {
      if (b == 0xF0) lower_ = 0x90;
      if (b == 0xF4) upper_ = 0x8F;
      need_ = 3;
    } else {
      out->append(kReplacement);  // 80..C1, F5..FF cannot start a character
      continue;
    }
    if (need_ > 0) held_[held_len_++] = char(b);
  }
}

void Utf8Assembler::finish(std::string* out) {
  if (held_len_ > 0) out->append(kReplacement);
  reset();
}

// ---- CleanSpacesStream ------------------------------------------------------
// The batch function (Tokenizer::decode, llama.cpp's detokenize) runs three
// passes, each over the previous pass's whole output:
// 1. a space before ? ! . , is dropped (only the one space right before);
// 2. " ' " becomes "'", scanning left to right; the space after the quote is
//    consumed, so it cannot open the next match (non-overlapping matches);
// 3. a space before 's 'm 're 've is dropped (nothing consumed).
// Each stage below is that pass as a transducer: it holds only what the next
// byte could still change, and at the end releases it unchanged (every
// pattern needs the byte that did not come).

void CleanSpacesStream::feed(std::string_view bytes, std::string* out) {
  for (char c : bytes) punct_stage(c, out);
}

void CleanSpacesStream::finish(std::string* out) {
  if (punct_space_) quote_stage(' ', out);
  if (quote_state_ >= 1) contraction_stage(' ', out);
  if (quote_state_ == 2) contraction_stage('\'', out);
  out->append(contraction_, contraction_len_);
  reset();
}

void CleanSpacesStream::punct_stage(char c, std::string* out) {
  if (punct_space_) {
    punct_space_ = false;
    if (c == '?' || c == '!' || c == '.' || c == ',') {
      quote_stage(c, out);
      return;
    }
    quote_stage(' ', out);
  }
  if (c == ' ')
    punct_space_ = true;
  else
    quote_stage(c, out);
}

void CleanSpacesStream::quote_stage(char c, std::string* out) {
  switch (quote_state_) {
    case 0:
      if (c == ' ')
        quote_state_ = 1;
      else
        contraction_stage(c, out);
      return;
    case 1:
      if (c == '\'') {
        quote_state_ = 2;
      } else if (c == ' ') {
        contraction_stage(' ', out);  // the newer space may still open " ' "
      } else {
        contraction_stage(' ', out);
        contraction_stage(c, out);
        quote_state_ = 0;
      }
      return;
    default:  // " '"
      quote_state_ = 0;
      if (c == ' ') {
        contraction_stage('\'', out);  // " ' " -> "'"
      } else {
        contraction_stage(' ', out);
        contraction_stage('\'', out);
        contraction_stage(c, out);  // not a space: nothing to hold
      }
      return;
  }
}

void CleanSpacesStream::contraction_stage(char c, std::string* out) {
  auto restart = [&] {  // c after a held prefix that did not match
    out->append(contraction_, contraction_len_);
    contraction_len_ = 0;
    if (c == ' ')
      contraction_[contraction_len_++] = ' ';
    else
      out->push_back(c);
  };
  switch (contraction_len_) {
    case 0:
      if (c == ' ')
        contraction_[contraction_len_++] = ' ';
      else
        out->push_back(c);
      return;
    case 1:  // " "
      if (c == '\'')
        contraction_[contraction_len_++] = '\'';
      else
        restart();
      return;
    case 2:  // " '"
      if (c == 's' || c == 'm') {
        out->push_back('\'');
        out->push_back(c);
        contraction_len_ = 0;
      } else if (c == 'r' || c == 'v') {
        contraction_[contraction_len_++] = c;
      } else {
        restart();
      }
      return;
    default:  // " 'r", " 'v"
      if (c == 'e') {
        out->push_back('\'');
        out->push_back(contraction_[2]);
        out->push_back('e');
        contraction_len_ = 0;
      } else {
        restart();
      }
      return;
  }
}

// ---- TokenTextStream --------------------------------------------------------

bool decode_cleans_spaces(const Tokenizer& tok) {
  if (tok.model() != Tokenizer::Model::kBpe) return false;  // decode() cleans only there
  std::vector<int32_t> ids;
  for (std::string_view part : {"a", " ", "."}) {
    const std::vector<int32_t> p = tok.encode(part, /*add_special=*/false, /*parse_special=*/false);
    if (p.empty() || tok.decode(p) != part) return false;  // cannot probe: assume no cleaning
    ids.insert(ids.end(), p.begin(), p.end());
  }
  return tok.decode(ids) == "a.";
}

TokenTextStream::TokenTextStream(const Tokenizer& tok, bool starts_sequence, bool render_special)
    : tok_(&tok),
      starts_sequence_(starts_sequence),
      render_special_(render_special),
      clean_spaces_(decode_cleans_spaces(tok)) {}

std::string TokenTextStream::push(int32_t token) {
  std::string piece = tok_->decode_token(token, render_special_);
  if (n_pushed_++ == 0 && starts_sequence_ && tok_->add_space_prefix() && !piece.empty() &&
      piece[0] == ' ')
    piece.erase(0, 1);
  std::string out;
  if (clean_spaces_) {
    scratch_.clear();
    clean_.feed(piece, &scratch_);
    utf8_.feed(scratch_, &out);
  } else {
    utf8_.feed(piece, &out);
  }
  return out;
}

std::string TokenTextStream::flush() {
  std::string out;
  scratch_.clear();
  clean_.finish(&scratch_);
  utf8_.feed(scratch_, &out);
  utf8_.finish(&out);
  return out;
}

// ---- StopMatcher ------------------------------------------------------------

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    stops_.push_back(std::move(stops[i]));
    index_.push_back(int32_t(i));
  }
}

void StopMatcher::reset() {
  held_.clear();
  stopped_ = false;
}

StopMatcher::Output StopMatcher::push(std::string_view text) {
  Output o;
  if (stopped_) {
    o.stopped = true;
    return o;
  }
  held_.append(text);

  // The match that ends first (then the longest). A match cannot start in text
  // already returned: that text was no prefix of any stop string.
  size_t best_end = std::string::npos, best_start = 0;
  int32_t best = -1;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = held_.find(stops_[i]);
    if (at == std::string::npos) continue;
    const size_t end = at + stops_[i].size();
    if (end < best_end || (end == best_end && at < best_start)) {
      best_end = end;
      best_start = at;
      best = int32_t(i);
    }
  }
  if (best >= 0) {
    o.text = held_.substr(0, best_start);
    o.stopped = true;
    o.stop_index = index_[size_t(best)];
    held_.clear();
    stopped_ = true;
    return o;
  }

  // Hold the longest tail that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(held_.size(), s.size() - 1); len > hold; --len) {
      if (std::string_view(held_).substr(held_.size() - len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  o.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return o;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace kt
