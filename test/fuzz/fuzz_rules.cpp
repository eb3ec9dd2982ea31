// libFuzzer target: a rule file (YAML + regex compilation), the alias check, and
// matching against module paths like the real ones.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "passes/rules/alias_table.h"
#include "passes/rules/rule_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = kt::rules::parse_rule_file(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  if (!f.ok()) {
    if (f.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  std::vector<std::string> warnings;
  (void)kt::rules::AliasTable::builtin().check(f.value(), &warnings);
  for (const char* path : {"model", "model.layers.3.mlp.experts", "model.layers.10.self_attn.kv_b_proj", "lm_head",
                           "model.embed_tokens"})
    (void)f->first_match(path, "torch.nn.Linear");
  return 0;
}
