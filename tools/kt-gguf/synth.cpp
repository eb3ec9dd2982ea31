// `kt-gguf synth --like NAME [--quant Q4_K_M] [--layers N] -o FILE`: a full-size
// GGUF with a real model's layout and random but valid weights, for benchmarks.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "kernels/random_blocks.h"
#include "runtime/gguf.h"
#include "tools/kt-gguf/commands.h"
#include "tools/kt-gguf/synth_spec.h"

namespace kt::gguf_tool {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

int usage() {
  std::fprintf(stderr,
               "usage: kt-gguf synth --like NAME [--quant Q4_K_M|Q8_0|IQ4_XS|BF16] [--layers N] [--seed S]\n"
               "                     [--vocab VOCAB.gguf] [--vocab-size N] [--mla-split] [--dry-run] -o FILE.gguf\n"
               "  ../shared/PEERS.md's files: deepseek-v2-lite --mla-split --vocab VOCAB;\n"
               "                              deepseek-v3 --layers 5 --vocab-size 102400 --mla-split --vocab VOCAB\n"
               "  NAME: ");
  for (const auto& s : synth::known_shapes()) std::fprintf(stderr, "%s ", s.name.c_str());
  std::fprintf(stderr, "\n");
  return 2;
}

}  // namespace

int synth_main(int argc, char** argv) {
  std::string like, quant = "Q4_K_M", out, vocab_path;
  int64_t layers = -1, vocab_size = 0;
  bool mla_split = false;
  uint64_t seed = 1;
  bool dry = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--dry-run") dry = true;
    else if (a == "--mla-split") mla_split = true;
    else if ((a == "--like" || a == "--quant" || a == "-o" || a == "--layers" || a == "--seed" || a == "--vocab" ||
              a == "--vocab-size") && !(v = val())) {
      std::fprintf(stderr, "kt-gguf synth: %s needs a value\n", a.c_str());
      return 2;
    } else if (a == "--like") like = v;
    else if (a == "--quant") quant = v;
    else if (a == "-o") out = v;
    else if (a == "--vocab") vocab_path = v;
    else if (a == "--layers") layers = std::strtoll(v, nullptr, 10);
    else if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
    else if (a == "--vocab-size") vocab_size = std::strtoll(v, nullptr, 10);
    else {
      std::fprintf(stderr, "kt-gguf synth: unknown argument '%s'\n", a.c_str());
      return usage();
    }
  }
  const synth::ModelShape* base = synth::find_shape(like);
  if (!base) {
    std::fprintf(stderr, "kt-gguf synth: unknown model '%s'\n", like.c_str());
    return usage();
  }
  if (out.empty() && !dry) return usage();
  synth::ModelShape m = *base;
  if (layers > 0) {
    if (layers < m.leading_dense) {
      std::fprintf(stderr, "kt-gguf synth: --layers %lld is fewer than the %lld leading dense layers\n", (long long)layers,
                   (long long)m.leading_dense);
      return 2;
    }
    m.layers = layers;
  } else if (layers == 0 || layers < -1) {
    std::fprintf(stderr, "kt-gguf synth: --layers must be at least 1\n");
    return 2;
  }
  if (vocab_size < 0 || vocab_size > (int64_t(1) << 24)) {
    std::fprintf(stderr, "kt-gguf synth: --vocab-size %lld is out of range\n", (long long)vocab_size);
    return 2;
  }
  if (vocab_size) m.vocab = vocab_size;
  m.mla_split = mla_split && m.arch == "deepseek2";
  auto table = synth::tensor_table(m, quant);
  if (!table) {
    std::fprintf(stderr, "kt-gguf synth: %s\n", table.error().message.c_str());
    return 2;
  }

  std::map<std::string, uint64_t> per_type;
  uint64_t total = 0;
  for (const auto& t : table.value()) {
    per_type[std::string(type_name(t.type))] += t.bytes();
    total += t.bytes();
  }
  std::fprintf(stderr, "synth %s (%s, %lld layers): %zu tensors, %.2f GiB of weights\n", m.name.c_str(), quant.c_str(),
               (long long)m.layers, table->size(), double(total) / double(1ull << 30));
  for (const auto& [name, bytes] : per_type) std::fprintf(stderr, "  %-8s %10.2f GiB\n", name.c_str(), double(bytes) / double(1ull << 30));
  if (dry) return 0;

  Result<GgufFile> vocab = Error{};
  if (!vocab_path.empty()) {
    vocab = GgufFile::open(vocab_path);
    if (!vocab) {
      std::fprintf(stderr, "kt-gguf synth: %s\n", vocab.error().message.c_str());
      return 1;
    }
  }
  GgufWriter w;
  if (auto st = synth::add_metadata(w, m, quant, vocab.ok() ? &vocab.value() : nullptr); !st) {
    std::fprintf(stderr, "kt-gguf synth: %s\n", st.error().message.c_str());
    return 1;
  }
  for (const auto& t : table.value()) {
    // Each tensor draws from its own stream, so a file is the same whatever the order.
    auto rng = std::make_shared<SplitMix64>(seed ^ fnv1a(t.name));
    w.add_tensor_fill(t.name, t.type, t.shape, [rng, t](uint8_t* dst, uint64_t n) {
      fill_random_blocks(t.type, dst, n, *rng, t.center, t.spread);
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (auto st = w.write(out); !st) {
    std::fprintf(stderr, "kt-gguf synth: %s\n", st.error().message.c_str());
    return 1;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "wrote %s: %.2f GiB in %.1f s (%.2f GB/s)\n", out.c_str(), double(total) / double(1ull << 30), s,
               double(total) / s / 1e9);
  return 0;
}

}  // namespace kt::gguf_tool
