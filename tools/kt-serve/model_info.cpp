// describe_model(): the served model's description from its GGUF file.
#include <sys/stat.h>

#include <cstdio>

#include "runtime/gguf.h"
#include "runtime/plan_loader.h"
#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

namespace {

// llama.cpp's llama_ftype, the value of general.file_type, by name.
std::string file_type_name(uint64_t t) {
  static const char* const names[] = {
      "F32",     "F16",    "Q4_0",   "Q4_1",   "Q4_1_SOME_F16", "Q4_2",    "Q4_3",   "Q8_0",  "Q5_0",
      "Q5_1",    "Q2_K",   "Q3_K_S", "Q3_K_M", "Q3_K_L",        "Q4_K_S",  "Q4_K_M", "Q5_K_S", "Q5_K_M",
      "Q6_K",    "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS",       "IQ3_XXS", "IQ1_S",  "IQ4_NL", "IQ3_S",
      "IQ3_M",   "IQ2_S",  "IQ2_M",  "IQ4_XS", "IQ1_M",         "BF16"};
  return t < std::size(names) ? names[t] : "unknown";
}

}  // namespace

ModelInfo describe_model(const Engine& engine, const std::string& gguf_path, std::string name) {
  const GgufFile& g = engine.gguf();
  ModelInfo m;
  m.name = std::move(name);
  m.arch = std::string(g.architecture());
  uint64_t ft = 0;
  const GgufValue* v = g.find("general.file_type");
  m.quantization = v && v->get_u64(&ft) ? file_type_name(ft) : "unknown";
  for (const GgufTensor& t : g.tensors()) m.n_params += uint64_t(t.nelements());
  m.file_bytes = g.file_size();
  struct stat st {};
  if (::stat(gguf_path.c_str(), &st) == 0) m.modified_unix = int64_t(st.st_mtime);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)gguf_fingerprint(g));
  m.digest = hex;
  return m;
}

}  // namespace kt::serve
