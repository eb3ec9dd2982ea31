// `--config config.json`: a Hugging Face config fills in what the GGUF file
// does not say and must agree with what it does (a config of another model
// is caught here, naming the key, instead of producing wrong output).
#include <cmath>

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "passes/arch_table.h"

namespace kt {
namespace {

// Looks up "a.b" as obj["a"]["b"]; nullptr when any step is absent.
const llvm::json::Value* lookup(const llvm::json::Object& root, std::string_view dotted) {
  const llvm::json::Object* obj = &root;
  while (true) {
    size_t dot = dotted.find('.');
    const llvm::json::Value* v = obj->get(llvm::StringRef(dotted.substr(0, dot)));
    if (!v || dot == std::string_view::npos) return v;
    obj = v->getAsObject();
    if (!obj) return nullptr;
    dotted = dotted.substr(dot + 1);
  }
}

bool close(double a, double b) {
  // GGUF keeps f32: agree to f32 precision.
  return std::fabs(a - b) <= 1e-6 * std::max(std::fabs(a), std::fabs(b));
}

std::string show(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

Status apply_hf_config(const std::string& path, const std::string& gguf_path, ModelConfig& cfg,
                       std::string* model_type) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf) return err(path, ": cannot read: ", buf.getError().message());
  auto parsed = llvm::json::parse((*buf)->getBuffer());
  if (!parsed) return err(path, ": invalid JSON: ", llvm::toString(parsed.takeError()));
  const llvm::json::Object* root = parsed->getAsObject();
  if (!root) return err(path, ": not a JSON object");
  model_type->clear();
  if (auto mt = root->getString("model_type")) *model_type = mt->str();

  for (const HParamKey& k : hparam_keys()) {
    if (k.hf_keys.empty()) continue;
    // The first spelling present wins ("num_experts" for Qwen, ...).
    std::string_view keys = k.hf_keys, used;
    const llvm::json::Value* v = nullptr;
    while (!v && !keys.empty()) {
      size_t bar = keys.find('|');
      used = keys.substr(0, bar);
      v = lookup(*root, used);
      keys = bar == std::string_view::npos ? std::string_view() : keys.substr(bar + 1);
    }
    if (!v) continue;
    // Per-head K/V sizes mean nothing for MLA: HF's DeepSeek-V3 config has a
    // head_dim (= qk_rope_head_dim), and llama.cpp's absorbed-MLA files say
    // head_count_kv = 1 where config.json says num_attention_heads.
    if ((k.name == "head_dim" || k.name == "num_key_value_heads") && cfg.kv_lora_rank > 0)
      continue;
    auto bad_type = [&](const char* want) {
      return err(path, ": '", used, "' should be ", want);
    };
    auto disagree = [&](const std::string& ours, const std::string& theirs) {
      return err(path, ": '", used, "' is ", theirs, " but ", gguf_path, " has ", ours);
    };
    bool known = cfg.known(k.name);
    if (auto* f = std::get_if<int64_t ModelConfig::*>(&k.field)) {
      int64_t x = 0;  // null means absent: q_lora_rank null is "no q-LoRA"
      if (k.name == "scoring_func") {
        auto s = v->getAsString();
        if (!s || (*s != "softmax" && *s != "sigmoid")) return bad_type("\"softmax\" or \"sigmoid\"");
        x = *s == "softmax" ? 1 : 2;
      } else if (v->kind() != llvm::json::Value::Null) {
        auto i = v->getAsInteger();
        if (!i) return bad_type("an integer");
        x = *i;
      }
      if (known && cfg.*(*f) != x) {
        if (k.name == "scoring_func")
          return disagree(cfg.*(*f) == 1 ? "softmax" : "sigmoid", x == 1 ? "softmax" : "sigmoid");
        return disagree(std::to_string(cfg.*(*f)), std::to_string(x));
      }
      cfg.*(*f) = x;
    } else if (auto* f = std::get_if<double ModelConfig::*>(&k.field)) {
      auto d = v->getAsNumber();
      if (!d) return bad_type("a number");
      double x = *d * k.hf_scale;
      if (known && !close(cfg.*(*f), x))
        return disagree(show(cfg.*(*f) / k.hf_scale), show(*d));
      if (!known) cfg.*(*f) = x;
    } else if (auto* f = std::get_if<bool ModelConfig::*>(&k.field)) {
      auto b = v->getAsBoolean();
      if (!b) return bad_type("true or false");
      if (known && cfg.*(*f) != *b)
        return disagree(cfg.*(*f) ? "true" : "false", *b ? "true" : "false");
      cfg.*(*f) = *b;
    } else if (auto* f = std::get_if<std::string ModelConfig::*>(&k.field)) {
      if (v->kind() == llvm::json::Value::Null) continue;
      auto s = v->getAsString();
      if (!s) return bad_type("a string");
      if (known && cfg.*(*f) != s->str()) return disagree(cfg.*(*f), s->str());
      cfg.*(*f) = s->str();
    }
  }
  return ok_status();
}

}  // namespace kt
