// Prompt text to tokens, the one rule kt-exec and kt-serve share: BOS (and
// EOS) as the model asks, except when the text already starts with the BOS
// token's text and special tokens are parsed: a rendered chat template usually
// writes BOS itself, and a second one would change the model's input.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/tokenizer.h"

namespace kt {

std::vector<int32_t> tokenize_prompt(const Tokenizer& tok, std::string_view text, bool parse_special);

}  // namespace kt
