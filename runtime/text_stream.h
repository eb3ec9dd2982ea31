// Streaming text out of a generator, one token at a time:
// - Utf8Assembler: bytes in, only whole valid UTF-8 out; an incomplete tail waits.
// - CleanSpacesStream: llama.cpp's clean_up_tokenization_spaces (" ," -> ",",
//   " 's" -> "'s", ...) as a transducer that holds back only what the next
//   bytes could still change.
// - TokenTextStream: token ids to text, exactly as Tokenizer::decode() renders
//   the whole sequence, emitted as soon as it can no longer change.
// - StopMatcher: cuts the text at the first stop string, holding back whatever
//   could be the start of one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer.h"

namespace kt {

// Bytes to valid UTF-8. A sequence that cannot become valid (a stray
// continuation byte, an overlong form, a surrogate, past U+10FFFF, a lead byte
// followed by a non-continuation) becomes one U+FFFD per maximal invalid
// subpart, as the WHATWG decoder and Python's "replace" do. A tail that is a
// valid prefix (E4 BD ...) is held until the next feed or finish().
class Utf8Assembler {
 public:
  void feed(std::string_view bytes, std::string* out);
  void finish(std::string* out);  // a held incomplete tail becomes U+FFFD
  bool pending() const { return held_len_ > 0; }
  void reset() { *this = Utf8Assembler(); }

 private:
  char held_[4] = {};
  uint8_t held_len_ = 0;
  uint8_t need_ = 0;                    // continuation bytes still expected
  uint8_t lower_ = 0x80, upper_ = 0xBF;  // bounds of the next continuation byte
};

// llama.cpp's clean_up_tokenization_spaces, incrementally: the output of all
// feeds and finish() equals the batch function applied to all the input. Its
// three passes become three chained stages, each holding at most a few ASCII
// bytes: a space (before ? ! . ,), a space and a quote (" ' " -> "'"), a space
// and up to three bytes (" 's" " 'm" " 're" " 've" lose the space).
class CleanSpacesStream {
 public:
  void feed(std::string_view bytes, std::string* out);
  void finish(std::string* out);
  void reset() { *this = CleanSpacesStream(); }

 private:
  void punct_stage(char c, std::string* out);
  void quote_stage(char c, std::string* out);
  void contraction_stage(char c, std::string* out);

  bool punct_space_ = false;  // a space that a following ? ! . , would drop
  uint8_t quote_state_ = 0;   // 0: -, 1: " ", 2: " '"
  char contraction_[3] = {};  // " ", " '", " 'r", " 'v"
  uint8_t contraction_len_ = 0;
};

// Whether tok.decode() cleans spaces (gpt-2-style vocabularies whose
// pre-tokenizer asks for it). Found by decoding "a", " ", "." as separate
// tokens, since the tokenizer keeps the flag to itself.
bool decode_cleans_spaces(const Tokenizer& tok);

// Token ids to text as they are generated. The concatenation of every push()
// and flush() equals tok.decode(ids, render_special) when that is valid UTF-8
// (invalid bytes become U+FFFD, see Utf8Assembler), and each returned piece is
// valid UTF-8 on its own:
// - starts_sequence: the first pushed id is the first of the sequence, so the
//   space the SentencePiece encoder prefixed is dropped from its piece, as
//   decode() does for ids[0] (even when ids[0] is BOS, whose piece is empty:
//   then nothing is dropped). A stream that continues after a prompt that is
//   not printed passes false.
// - gpt-2 space cleaning (when decode() does it) runs incrementally; a trailing
//   space or " '" waits for the next token.
// - the text of special tokens appears only with render_special, as in decode().
class TokenTextStream {
 public:
  // tok must outlive the stream.
  explicit TokenTextStream(const Tokenizer& tok, bool starts_sequence = true,
                           bool render_special = false);

  // The text that the token completes (possibly "").
  std::string push(int32_t token);
  // Everything held back. Ends the text: pushes after it continue the same
  // token sequence (no prefix space is dropped again) but space cleaning and
  // UTF-8 assembly start afresh there.
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool starts_sequence_;
  bool render_special_;
  bool clean_spaces_;
  uint64_t n_pushed_ = 0;
  CleanSpacesStream clean_;
  Utf8Assembler utf8_;
  std::string scratch_;
};

// Stops generated text at the first stop string. push() returns what can be
// shown now: everything except a tail that might begin a stop string. When a
// stop string completes, the text before it is returned with stopped = true;
// the stop string and anything after it are dropped, and later pushes return
// nothing. Of several matches the one that ends first wins (then the longer),
// so the outcome does not depend on how the text was split into pushes. Empty
// stop strings are ignored. Valid UTF-8 in gives valid UTF-8 out: a held tail
// starts where a stop string does, at a character boundary.
class StopMatcher {
 public:
  struct Output {
    std::string text;
    bool stopped = false;
    int32_t stop_index = -1;  // index into the stop strings given, when stopped
  };

  explicit StopMatcher(std::vector<std::string> stops);

  Output push(std::string_view text);
  // The held tail (the text ended without completing a stop string); "" once stopped.
  std::string flush();
  bool stopped() const { return stopped_; }
  void reset();

 private:
  std::vector<std::string> stops_;
  std::vector<int32_t> index_;  // stops_[i] was given as stop string index_[i]
  std::string held_;
  bool stopped_ = false;
};

}  // namespace kt
