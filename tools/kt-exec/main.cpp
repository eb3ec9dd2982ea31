// kt-exec: runs a plan. Loads plan.ktp and the GGUF it names, tokenizes the
// prompt with the model's own tokenizer, prefills, samples, and streams the
// text to stdout; a summary of load time and prefill / decode speed goes to
// stderr. --chat talks to the model turn by turn through its chat template.
// Errors are one line on stderr and exit status 1. Links no MLIR.
#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/registry.h"
#include "runtime/chat_template.h"
#include "runtime/executor.h"
#include "runtime/npy_writer.h"
#include "runtime/plan_loader.h"
#include "runtime/routing_hooks.h"
#include "runtime/routing_profile.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

const char kUsage[] =
    "usage: kt-exec plan.ktp (-p TEXT | --prompt-file FILE | --chat) [options]\n"
    "  -n N                 tokens to generate (default 128; -1: until end of text or context)\n"
    "  --temp T             temperature (default 0.8; 0: greedy)\n"
    "  --top-k K --top-p P --min-p M --repeat-penalty R --repeat-last-n N\n"
    "  --presence-penalty P --frequency-penalty F --seed S (default: random)\n"
    "  --greedy             the same as --temp 0\n"
    "  --threads N          CPU threads (default: physical cores)\n"
    "  --ctx N              context tokens (default: the plan's)\n"
    "  --chat               interactive chat through the model's chat template\n"
    "                       (end a line with \\ to continue it; /exit quits, /reset forgets)\n"
    "  --system TEXT        system message for --chat\n"
    "  --chat-template F    a Jinja chat template file to use instead of the model's\n"
    "  --ignore-eos         keep generating after the end-of-text token\n"
    "  --special            parse special tokens written in the prompt (<|im_start|> ...)\n"
    "  --logits-out F.npy   float32 logits: every prompt position, then one row per generated token\n"
    "  --reference          run the reference kernels only (slow; for checking)\n"
    "  --exact              reference rounding in double instead of llama.cpp's\n"
    "  --verbose            print the kernels chosen\n"
    "  --profile            time every kernel and print a table at the end\n"
    "  --no-cuda-graphs     launch decode's GPU kernels one by one (not recorded and replayed)\n"
    "  --routing-profile-out F.json  count which experts the routers chose (prefill and\n"
    "                       decode apart) and write them at exit (kt-gguf profile-show)\n"
    "  --list-kernels       print the kernels this build has and exit\n";

int fail(const std::string& message) {
  std::fprintf(stderr, "kt-exec: %s\n", message.c_str());
  return 1;
}

struct Args {
  std::string plan, prompt, prompt_file, system, logits_out, chat_template, routing_profile_out;
  bool have_prompt = false, chat = false, ignore_eos = false, special = false, reference = false, exact = false,
       verbose = false, list_kernels = false, profile = false, cuda_graphs = true;
  int64_t n_predict = 128;
  int threads = 0;
  int64_t ctx = 0;
  kt::SamplerParams sampling;
};

// Parses argv; returns an error message, or "" on success.
std::string parse_args(int argc, char** argv, Args& a) {
  auto need = [&](int& i) -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
  auto number = [](const char* s, double& out) {
    if (!s || !*s) return false;
    char* end = nullptr;
    out = std::strtod(s, &end);
    return *end == '\0';
  };
  // Numeric options: names, accepted range, where the value goes.
  struct NumOpt {
    std::vector<std::string_view> names;
    double lo, hi;
    std::function<void(double)> set;
  };
  const NumOpt num_opts[] = {
      {{"-n", "--n-predict"}, -1, 1e9, [&](double x) { a.n_predict = int64_t(x); }},
      {{"--temp"}, 0, 100, [&](double x) { a.sampling.temperature = float(x); }},
      {{"--top-k"}, 0, 1e9, [&](double x) { a.sampling.top_k = int32_t(x); }},
      {{"--top-p"}, 0, 1, [&](double x) { a.sampling.top_p = float(x); }},
      {{"--min-p"}, 0, 1, [&](double x) { a.sampling.min_p = float(x); }},
      {{"--repeat-penalty"}, 0, 100, [&](double x) { a.sampling.repeat_penalty = float(x); }},
      {{"--repeat-last-n"}, -1, 1e9, [&](double x) { a.sampling.repeat_last_n = int32_t(x); }},
      {{"--presence-penalty"}, -2, 2, [&](double x) { a.sampling.presence_penalty = float(x); }},
      {{"--frequency-penalty"}, -2, 2, [&](double x) { a.sampling.frequency_penalty = float(x); }},
      {{"--seed"}, 0, 1.8e19, [&](double x) { a.sampling.seed = uint64_t(x); }},
      {{"--threads", "-t"}, 1, 4096, [&](double x) { a.threads = int(x); }},
      {{"--ctx", "-c"}, 1, double(1 << 24), [&](double x) { a.ctx = int64_t(x); }},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    double v = 0;
    auto num_opt = [&](double lo, double hi) -> std::optional<double> {
      const char* s = need(i);
      if (!number(s, v) || v < lo || v > hi) return std::nullopt;
      return v;
    };
    auto bad = [&] { return arg + ": expected a number in range, got '" + (i < argc ? argv[i] : "") + "'"; };
    const NumOpt* num = nullptr;
    for (const NumOpt& o : num_opts)
      if (std::find(o.names.begin(), o.names.end(), arg) != o.names.end()) num = &o;
    if (num) {
      auto x = num_opt(num->lo, num->hi);
      if (!x) return bad();
      num->set(*x);
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "-p" || arg == "--prompt") {
      const char* s = need(i);
      if (!s) return arg + ": missing text";
      a.prompt = s;
      a.have_prompt = true;
    } else if (arg == "--prompt-file" || arg == "-f") {
      const char* s = need(i);
      if (!s) return arg + ": missing file";
      a.prompt_file = s;
    } else if (arg == "--system") {
      const char* s = need(i);
      if (!s) return arg + ": missing text";
      a.system = s;
    } else if (arg == "--chat-template") {
      const char* s = need(i);
      if (!s) return arg + ": missing file";
      a.chat_template = s;
    } else if (arg == "--logits-out") {
      const char* s = need(i);
      if (!s) return arg + ": missing file";
      a.logits_out = s;
    } else if (arg == "--routing-profile-out") {
      const char* s = need(i);
      if (!s) return arg + ": missing file";
      a.routing_profile_out = s;
    } else if (arg == "--greedy") {
      a.sampling.temperature = 0;
    } else if (arg == "--chat") {
      a.chat = true;
    } else if (arg == "--ignore-eos") {
      a.ignore_eos = true;
    } else if (arg == "--special") {
      a.special = true;
    } else if (arg == "--reference") {
      a.reference = true;
    } else if (arg == "--exact") {
      a.exact = true;
    } else if (arg == "--verbose" || arg == "-v") {
      a.verbose = true;
    } else if (arg == "--profile") {
      a.profile = true;
    } else if (arg == "--no-cuda-graphs") {
      a.cuda_graphs = false;
    } else if (arg == "--list-kernels") {
      a.list_kernels = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return "unknown option " + arg + " (kt-exec --help)";
    } else if (a.plan.empty()) {
      a.plan = arg;
    } else {
      return "unexpected argument '" + arg + "' (kt-exec --help)";
    }
  }
  return "";
}

struct Timing {
  double load_s = 0, prefill_s = 0, decode_s = 0;
  int64_t prefill_tokens = 0, generated = 0, decode_steps = 0;
  // kt-compile --profile's prediction (plan options), printed beside the
  // achieved decode speed; 0 when the plan has none.
  double predicted = 0, predicted_without = 0, cpu_gbs = 0;

  // Decode speed is decode steps (one token through the model) per second.
  void print() const {
    const double decode = decode_s > 0 ? decode_steps / decode_s : 0.0;
    std::fprintf(stderr, "\nkt-exec: load %.2f s | prompt %lld tokens, %.1f tok/s | generated %lld tokens, %.1f tok/s\n",
                 load_s, (long long)prefill_tokens, prefill_s > 0 ? prefill_tokens / prefill_s : 0.0,
                 (long long)generated, decode);
    if (predicted > 0)
      std::fprintf(stderr,
                   "kt-exec: decode %.1f tok/s achieved, %.1f predicted by kt-compile --profile (%.1f without the "
                   "profile's hot experts; CPU-bound at %.0f GB/s)\n",
                   decode, predicted, predicted_without, cpu_gbs);
  }
};


double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Generates after the sequence's last logits; streams text to stdout and
// returns it. logits_out (may be null) receives one row per generated token.
kt::Result<std::string> generate(kt::Sequence& seq, std::span<const float> logits, const kt::Tokenizer& tok,
                                 kt::Sampler& sampler, const Args& a, int64_t n_ctx, kt::NpyWriter* logits_out,
                                 Timing& timing, kt::RoutingStats* routing) {
  if (routing) routing->set_decode(true);
  kt::TokenTextStream stream(tok, /*starts_sequence=*/false);
  std::string text;
  std::vector<float> row(logits.begin(), logits.end());
  const int64_t limit = a.n_predict < 0 ? n_ctx : a.n_predict;
  for (int64_t i = 0; i < limit && seq.n_past() < n_ctx; ++i) {
    const int32_t token = sampler.sample(row.data(), int64_t(row.size()));
    if (tok.is_eog(token) && !a.ignore_eos) break;
    sampler.accept(token);
    const std::string piece = stream.push(token);
    text += piece;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    // The last token is fed only when its logits are wanted (they are the
    // file's last row): otherwise nothing would read them.
    ++timing.generated;
    if (i + 1 == limit && !logits_out) break;
    const auto t0 = Clock::now();
    auto next = seq.feed(std::span<const int32_t>(&token, 1));
    timing.decode_s += seconds_since(t0);
    ++timing.decode_steps;
    if (!next.ok()) return next.error();
    if (logits_out) KT_TRY(logits_out->append(*next));
    row.assign(next->begin(), next->end());
  }
  const std::string rest = stream.flush();
  text += rest;
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fflush(stdout);
  return text;
}

std::vector<int32_t> tokenize_prompt(const kt::Tokenizer& tok, const std::string& text, bool parse_special) {
  // A rendered chat template usually writes the BOS token itself.
  const bool has_bos = tok.bos() >= 0 && !tok.token_text(tok.bos()).empty() &&
                       text.rfind(tok.token_text(tok.bos()), 0) == 0 && parse_special;
  return tok.encode(text, /*add_special=*/!has_bos, parse_special);
}

int run_chat(kt::Executor& ex, const kt::Tokenizer& tok, kt::Sampler& sampler, const Args& a, Timing& timing,
             kt::RoutingStats* routing) {
  std::string source = ex.plan().chat_template() ? ex.plan().chat_template()->str() : "";
  std::string source_name = "tokenizer.chat_template";
  if (!a.chat_template.empty()) {
    std::ifstream in(a.chat_template, std::ios::binary);
    if (!in) return fail(a.chat_template + ": cannot read the chat template");
    std::ostringstream ss;
    ss << in.rdbuf();
    source = ss.str();
    source_name = a.chat_template;
  }
  if (source.empty())
    return fail(a.plan + ": the model has no chat template (tokenizer.chat_template): use -p or --prompt-file, or --chat-template FILE");
  auto tpl = kt::ChatTemplate::parse(source, source_name);
  if (!tpl.ok()) return fail(tpl.error().message);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  kt::Sequence seq(ex, 0);
  std::string line;
  for (;;) {
    std::fputs("\n> ", stderr);
    std::string input;
    bool more = true, eof = false;
    while (more) {
      if (!std::getline(std::cin, line)) {
        eof = true;
        break;
      }
      more = !line.empty() && line.back() == '\\';
      if (more) line.pop_back();
      input += line;
      if (more) input += '\n';
    }
    if (eof && input.empty()) break;
    if (input == "/exit" || input == "/quit") break;
    if (input == "/reset") {
      messages = nlohmann::ordered_json::array();
      if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
      seq.truncate(0);
      sampler.reset();
      continue;
    }
    if (input.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", input}});
    nlohmann::ordered_json ctx = {{"messages", messages}, {"add_generation_prompt", true},
                                  {"bos_token", tok.bos() >= 0 ? tok.token_text(tok.bos()) : ""},
                                  {"eos_token", tok.eos() >= 0 ? tok.token_text(tok.eos()) : ""}};
    auto prompt = tpl->render(ctx);
    if (!prompt.ok()) return fail(prompt.error().message);
    const std::vector<int32_t> tokens = tokenize_prompt(tok, *prompt, /*parse_special=*/true);
    if (int64_t(tokens.size()) >= ex.n_ctx())
      return fail("the conversation (" + std::to_string(tokens.size()) + " tokens) no longer fits the context of " +
                  std::to_string(ex.n_ctx()) + " tokens: /reset or a larger --ctx");
    // Reuse the cached prefix (the earlier turns); run at least one token.
    const int64_t keep = std::min<int64_t>(seq.common_prefix(tokens), int64_t(tokens.size()) - 1);
    seq.truncate(keep);
    if (routing) routing->set_decode(false);
    const auto t0 = Clock::now();
    auto logits = seq.feed(std::span<const int32_t>(tokens).subspan(size_t(keep)));
    timing.prefill_s += seconds_since(t0);
    timing.prefill_tokens += int64_t(tokens.size()) - keep;
    if (!logits.ok()) return fail(logits.error().message);
    for (int32_t t : tokens) sampler.accept(t);
    auto reply = generate(seq, *logits, tok, sampler, a, ex.n_ctx(), nullptr, timing, routing);
    if (!reply.ok()) return fail(reply.error().message);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "[%lld prompt tokens: %lld new, %lld from the cache]", (long long)tokens.size(),
                 (long long)(int64_t(tokens.size()) - keep), (long long)keep);
    messages.push_back({{"role", "assistant"}, {"content", *reply}});
    if (eof) break;
  }
  timing.print();
  return 0;
}

// --routing-profile-out: the counts, tied to the model by its GGUF fingerprint.
int write_profile(const kt::Executor& ex, const kt::RoutingStats& routing, const std::string& path) {
  const kt::GgufFile& g = ex.gguf();
  const kt::RoutingProfile p = kt::routing_profile_from(routing, kt::gguf_fingerprint(g), std::string(g.architecture()), 0);
  if (auto s = kt::write_routing_profile(path, p); !s.ok()) return fail(s.error().message);
  std::fprintf(stderr, "kt-exec: routing profile of %zu MoE layers written to %s\n", p.layers.size(), path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (const std::string e = parse_args(argc, argv, a); !e.empty()) return fail(e);
  if (a.list_kernels) {
    for (const kt::kern::KernelEntry& k : kt::kern::all_kernels())
      std::printf("%-32s %s\n", std::string(k.name).c_str(), std::string(k.summary).c_str());
    return 0;
  }
  if (a.plan.empty()) return fail("no plan given\n" + std::string(kUsage));
  if (!a.chat && !a.have_prompt && a.prompt_file.empty()) return fail("no prompt: give -p TEXT, --prompt-file FILE or --chat");
  if (!a.prompt_file.empty()) {
    std::ifstream in(a.prompt_file, std::ios::binary);
    if (!in) return fail(a.prompt_file + ": cannot read the prompt file");
    std::ostringstream ss;
    ss << in.rdbuf();
    a.prompt = ss.str();
    a.have_prompt = true;
  }
  if (!a.chat && a.prompt.empty()) return fail((a.prompt_file.empty() ? "-p" : a.prompt_file) + ": the prompt is empty");

  Timing timing;
  const auto t_load = Clock::now();
  kt::ExecOptions opts;
  opts.threads = a.threads;
  opts.n_ctx = a.ctx;
  opts.impl = a.reference ? kt::kern::Impl::Reference : kt::kern::Impl::Fast;
  opts.rounding = a.exact ? kt::kern::Rounding::Exact : kt::kern::Rounding::GgmlCpu;
  opts.cuda_graphs = a.cuda_graphs;
  auto ex = kt::Executor::load(a.plan, opts);
  if (!ex.ok()) return fail(ex.error().message);
  auto tok = kt::Tokenizer::from_gguf((*ex)->gguf());
  if (!tok.ok()) return fail(tok.error().message);
  timing.load_s = seconds_since(t_load);
  timing.predicted = kt::plan_option_f((*ex)->plan(), "predicted_decode_tok_s");
  timing.predicted_without = kt::plan_option_f((*ex)->plan(), "predicted_decode_tok_s_without_profile");
  timing.cpu_gbs = kt::plan_option_f((*ex)->plan(), "cpu_bandwidth_gbs");
  if (a.verbose)
    std::fprintf(stderr, "kt-exec: %d threads, context %lld\n%s", (*ex)->n_threads(), (long long)(*ex)->n_ctx(),
                 (*ex)->kernel_summary().c_str());
  kt::Sampler sampler(a.sampling);
  (*ex)->set_profiling(a.profile);
  // Sees every routing decision; the phase is set before each feed.
  kt::RoutingStats routing_stats;
  kt::RoutingStats* routing = a.routing_profile_out.empty() ? nullptr : &routing_stats;
  (*ex)->set_routing_hook(routing);
  if (a.chat) {
    const int rc = run_chat(**ex, *tok, sampler, a, timing, routing);
    return rc == 0 && routing ? write_profile(**ex, *routing, a.routing_profile_out) : rc;
  }

  const std::vector<int32_t> prompt = tokenize_prompt(*tok, a.prompt, a.special);
  if (prompt.empty()) return fail("the prompt has no tokens");
  if (int64_t(prompt.size()) > (*ex)->n_ctx())
    return fail("the prompt has " + std::to_string(prompt.size()) + " tokens, longer than the context of " +
                std::to_string((*ex)->n_ctx()) + " (--ctx, kt-compile --ctx)");
  std::optional<kt::NpyWriter> logits_out;
  if (!a.logits_out.empty()) {
    auto w = kt::NpyWriter::create(a.logits_out, (*ex)->n_vocab());
    if (!w.ok()) return fail(w.error().message);
    logits_out.emplace(std::move(*w));
  }
  kt::Sequence seq(**ex, 0);
  kt::Status row_status = kt::ok_status();
  kt::Sequence::RowFn each_row;
  if (logits_out)
    each_row = [&](int64_t, std::span<const float> row) {
      if (row_status.ok()) row_status = logits_out->append(row);
    };
  if (routing) routing->set_decode(false);
  const auto t0 = Clock::now();
  auto logits = seq.feed(prompt, each_row);
  timing.prefill_s = seconds_since(t0);
  timing.prefill_tokens = int64_t(prompt.size());
  if (!logits.ok()) return fail(logits.error().message);
  if (!row_status.ok()) return fail(row_status.error().message);
  for (int32_t t : prompt) sampler.accept(t);
  auto text = generate(seq, *logits, *tok, sampler, a, (*ex)->n_ctx(), logits_out ? &*logits_out : nullptr, timing,
                       routing);
  if (!text.ok()) return fail(text.error().message);
  std::fputs("\n", stdout);
  if (logits_out)
    if (auto s = logits_out->close(); !s.ok()) return fail(s.error().message);
  timing.print();
  if (a.profile) std::fprintf(stderr, "%s", (*ex)->profile_report().c_str());
  if (routing) return write_profile(**ex, *routing, a.routing_profile_out);
  return 0;
}
