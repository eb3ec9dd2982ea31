#include "tools/kt-serve/chat_prompt.h"

#include "runtime/prompt.h"

namespace kt::serve {

ChatPrompt chat_prompt(const ServeContext& ctx, const nlohmann::ordered_json& messages) {
  if (!ctx.chat_template)
    return {{}, bad_request("the model has no chat template (GGUF tokenizer.chat_template): start kt-serve with "
                            "--chat-template FILE, or use the completion endpoints",
                            "messages", "no_chat_template")};
  const Tokenizer& tok = ctx.engine.tokenizer();
  const nlohmann::ordered_json context = {{"messages", messages},
                                          {"add_generation_prompt", true},
                                          {"bos_token", tok.bos() >= 0 ? tok.token_text(tok.bos()) : ""},
                                          {"eos_token", tok.eos() >= 0 ? tok.token_text(tok.eos()) : ""}};
  auto text = ctx.chat_template->render(context);
  if (!text.ok()) return {{}, bad_request("the chat template refused the messages: " + text.error().message, "messages")};
  return {tokenize_prompt(tok, *text, /*parse_special=*/true), std::nullopt};
}

}  // namespace kt::serve
