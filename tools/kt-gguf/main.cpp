// kt-gguf: inspect GGUF files, synthesize full-size models, show and merge routing profiles.
#include <cstdio>
#include <cstring>

#include "tools/kt-gguf/commands.h"

static void usage(FILE* out) {
  std::fprintf(out,
               "usage: kt-gguf <command> [args]\n"
               "  info FILE [--all]   architecture, hyper-parameters, tokenizer, tensor table with totals per type\n"
               "  synth --like NAME [--quant Q4_K_M] [--layers N] -o FILE\n"
               "                      a full-size model's layout with random valid weights (benchmarks)\n"
               "  profile-show PROFILE.json [--top N]\n"
               "                      a routing profile (kt-exec --routing-profile-out) per layer: hottest\n"
               "                      experts, the share of choices the hottest 25%% take, temporal locality\n"
               "  profile-merge A.json B.json ... -o OUT.json   add the counts of profiles of one model\n"
               "  profile-synth MODEL.gguf [--routing zipf:S] [--seed N] -o OUT.json\n"
               "                      the profile kt-bench e2e's forced routing follows (expected counts)\n");
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "info")) return kt::gguf_tool::info_main(argc - 2, argv + 2);
  if (!std::strcmp(argv[1], "synth")) return kt::gguf_tool::synth_main(argc - 2, argv + 2);
  if (!std::strcmp(argv[1], "profile-show")) return kt::gguf_tool::profile_show_main(argc - 2, argv + 2);
  if (!std::strcmp(argv[1], "profile-merge")) return kt::gguf_tool::profile_merge_main(argc - 2, argv + 2);
  if (!std::strcmp(argv[1], "profile-synth")) return kt::gguf_tool::profile_synth_main(argc - 2, argv + 2);
  std::fprintf(stderr, "kt-gguf: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
