// `kt-gguf info FILE`: what gguf-dump shows, in one screen: the architecture and
// its hyper-parameters, the tokenizer, other metadata, and the tensor table with
// totals per type.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "runtime/gguf.h"
#include "tools/kt-gguf/commands.h"

namespace kt::gguf_tool {
namespace {

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / double(1ull << 20));
  else if (b >= (1ull << 10)) std::snprintf(buf, sizeof buf, "%.2f KiB", double(b) / double(1ull << 10));
  else std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)b);
  return buf;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

int info_main(int argc, char** argv) {
  const char* path = nullptr;
  bool all = false;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--all")) all = true;
    else if (!path) path = argv[i];
    else {
      std::fprintf(stderr, "kt-gguf info: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (!path) {
    std::fprintf(stderr, "usage: kt-gguf info FILE [--all]\n");
    return 2;
  }
  auto f = GgufFile::open(path);
  if (!f) {
    std::fprintf(stderr, "kt-gguf: %s\n", f.error().message.c_str());
    return 1;
  }
  const std::string arch(f->architecture());
  std::printf("file:          %s\n", path);
  std::printf("gguf version:  %u, alignment %llu, %zu metadata keys, %zu tensors, %s\n", f->version(),
              (unsigned long long)f->alignment(), f->metadata().size(), f->tensors().size(),
              human_bytes(f->file_size()).c_str());
  std::printf("architecture:  %s\n", arch.empty() ? "(none)" : arch.c_str());
  if (auto name = f->get_string("general.name"); !name.empty())
    std::printf("name:          %.*s\n", int(name.size()), name.data());

  // Hyper-parameters are the "<arch>." keys; tokenizer keys next; the rest last.
  std::printf("\nhyper-parameters:\n");
  for (const auto& kv : f->metadata())
    if (!arch.empty() && starts_with(kv.key, arch + "."))
      std::printf("  %-48s %s\n", kv.key.c_str(), kv.value.to_string().c_str());

  std::printf("\ntokenizer:\n");
  const auto model = f->get_string("tokenizer.ggml.model");
  const auto pre = f->get_string("tokenizer.ggml.pre");
  const GgufValue* tokens = f->find("tokenizer.ggml.tokens");
  const GgufValue* merges = f->find("tokenizer.ggml.merges");
  std::printf("  kind:  %s%s%s\n",
              model == "llama" ? "SentencePiece (llama)" : model == "gpt2" ? "BPE (gpt2)" : model.empty() ? "(none)" : std::string(model).c_str(),
              pre.empty() ? "" : ", pre-tokenizer ", std::string(pre).c_str());
  if (tokens) std::printf("  vocab: %llu tokens\n", (unsigned long long)tokens->size());
  if (merges) std::printf("  merges: %llu\n", (unsigned long long)merges->size());
  for (const auto& kv : f->metadata())
    if (starts_with(kv.key, "tokenizer.") && kv.value.type() != GgufType::ARRAY &&
        kv.key != "tokenizer.ggml.model" && kv.key != "tokenizer.ggml.pre")
      std::printf("  %-48s %s\n", kv.key.c_str(), kv.value.to_string().c_str());

  std::printf("\nother metadata:\n");
  for (const auto& kv : f->metadata())
    if (!(!arch.empty() && starts_with(kv.key, arch + ".")) && !starts_with(kv.key, "tokenizer.") &&
        kv.key != "general.architecture")
      std::printf("  %-48s %s\n", kv.key.c_str(), kv.value.to_string().c_str());

  std::printf("\ntensors:\n  %-40s %-8s %-26s %12s\n", "name", "type", "shape", "bytes");
  struct Total { uint64_t count = 0, bytes = 0, elems = 0; };
  std::map<std::string, Total> per_type;
  uint64_t total_bytes = 0, total_elems = 0;
  const size_t n = f->tensors().size();
  size_t shown = 0;
  for (const GgufTensor& t : f->tensors()) {
    Total& tot = per_type[std::string(type_name(t.type))];
    ++tot.count;
    tot.bytes += t.nbytes;
    tot.elems += uint64_t(t.nelements());
    total_bytes += t.nbytes;
    total_elems += uint64_t(t.nelements());
    // Large models have thousands of tensors: without --all show the first 40.
    if (all || shown < 40) {
      std::printf("  %-40s %-8s %-26s %12llu\n", t.name.c_str(), std::string(type_name(t.type)).c_str(),
                  t.shape_string().c_str(), (unsigned long long)t.nbytes);
      ++shown;
    }
  }
  if (shown < n) std::printf("  ... %zu more (--all shows every tensor)\n", n - shown);

  std::printf("\ntotals per type:\n  %-8s %8s %16s %14s %12s\n", "type", "tensors", "elements", "bytes", "bits/weight");
  for (const auto& [name, tot] : per_type)
    std::printf("  %-8s %8llu %16llu %14s %12.2f\n", name.c_str(), (unsigned long long)tot.count,
                (unsigned long long)tot.elems, human_bytes(tot.bytes).c_str(),
                tot.elems ? 8.0 * double(tot.bytes) / double(tot.elems) : 0.0);
  std::printf("  %-8s %8zu %16llu %14s %12.2f\n", "all", n, (unsigned long long)total_elems,
              human_bytes(total_bytes).c_str(), total_elems ? 8.0 * double(total_bytes) / double(total_elems) : 0.0);

  // A file whose tensors use types kt cannot compute with is worth saying so.
  for (const auto& [name, tot] : per_type) {
    const TypeTraits* tt = find_type_by_name(name);
    if (tt && !tt->supported())
      std::printf("note: %llu tensors are %s, which kt does not support yet\n", (unsigned long long)tot.count, name.c_str());
  }
  return 0;
}

}  // namespace kt::gguf_tool
