#include "runtime/prompt.h"

namespace kt {

std::vector<int32_t> tokenize_prompt(const Tokenizer& tok, std::string_view text, bool parse_special) {
  const std::string& bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : std::string();
  const bool has_bos = parse_special && !bos.empty() && text.substr(0, bos.size()) == bos;
  return tok.encode(text, /*add_special=*/!has_bos, parse_special);
}

}  // namespace kt
