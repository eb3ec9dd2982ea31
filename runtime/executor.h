// The executor: a plan bound to its GGUF file and run step by step.
//
// load() verifies the plan (runtime/plan_loader.h), maps the GGUF it names and
// refuses a changed one, binds every weight over the mapping (checking each
// tensor's type and shape against the plan), allocates the activation arenas
// and the KV caches (n_slots sequences of n_ctx tokens each), and binds every
// call through the kernel registry, so a plan that cannot run fails here, in
// one line naming the call. forward() then runs one phase's calls for a step:
// the tokens of one or more sequences (continuous batching), each at its
// position in its own KV slot, and returns the logits of the rows asked for.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "runtime/gguf.h"
#include "runtime/plan_loader.h"
#include "runtime/result.h"

namespace kt {

struct ExecOptions {
  int threads = 0;      // 0: physical cores
  int64_t n_ctx = 0;    // tokens per sequence; 0: the plan's; at most the plan's
  int n_slots = 1;      // sequences whose KV caches are held at once
  kern::Impl impl = kern::Impl::Fast;
  kern::Rounding rounding = kern::Rounding::GgmlCpu;
  // Decode's GPU work recorded once as CUDA graphs and replayed (one launch per
  // run of GPU calls between the host's waits). Off: every kernel launched on
  // its own, as prefill always is. KT_CUDA_GRAPHS=0 also turns it off.
  bool cuda_graphs = true;
  // Only runs of at least this many GPU calls are recorded: a graph's launch
  // costs more host time than it saves on a short run whose kernels outlast
  // their launches (hybrid V2-Lite on the H100: runs of ~15 calls between
  // CPU experts, 61.3 tok/s recorded against 63.6 launched; the all-GPU step
  // of ~600 calls: 144.5 against 120.1).
  int cuda_graph_min_calls = 32;
};

// One step's tokens. pos[i] is token i's position in the sequence held in KV
// slot slot[i]; a sequence's tokens are consecutive and in order. outputs: the
// token indices whose logits are wanted, in order.
struct Batch {
  std::vector<int32_t> tokens, pos, slot, outputs;

  // A run of one sequence: tokens at pos0, pos0+1, ... in `slot`; logits for
  // the last token, or for every token when all_logits.
  static Batch sequence(std::span<const int32_t> tokens, int32_t pos0, int32_t slot, bool all_logits);
};

enum class PhaseKind { Prefill, Decode };

class Executor {
 public:
  static Result<std::unique_ptr<Executor>> load(const std::string& plan_path, const ExecOptions& options = {});
  ~Executor();

  const plan::Plan& plan() const;
  const PlanFile& plan_file() const;
  const GgufFile& gguf() const;
  int64_t n_vocab() const;
  int64_t n_ctx() const;
  int n_slots() const;
  int n_threads() const;
  // Tokens one step of the phase may hold (all sequences together; prefill:
  // its longest variant, e.g. prefill.long).
  int64_t max_tokens(PhaseKind phase) const;
  // What each kernel bind chose ("cpu.matmul: avx512-vnni x 120, reference x 3"), for --verbose.
  std::string kernel_summary() const;

  // Runs the phase over the batch; the logits, [outputs][n_vocab], stay valid
  // until the next forward(). Errors (a token outside the vocabulary, a
  // position past n_ctx, too many tokens) change nothing.
  Result<std::span<const float>> forward(const Batch& batch, PhaseKind phase);

  // Routing decisions of every MoE layer go through hook (null: none).
  void set_routing_hook(kern::RoutingHook* hook);

  // Per-kernel wall time of every call from now on (GPU calls: the time to
  // issue them; their work overlaps), and with a GPU the host's waits for it
  // (before CPU calls that read its copies, at the step's end): rows
  // "(host waits ...)"; GPU calls run one by one (not recorded) also get a
  // row "... [gpu]" of their time on the GPU (events around each).
  // profile_report(): a table, slowest first.
  void set_profiling(bool on);
  void clear_profile();  // forgets the rows profile_report() shows
  // ExecOptions::cuda_graphs after load (benchmarks compare both);
  // cuda_graphs(): recordings made so far (kept or since replaced).
  void set_cuda_graphs(bool on);
  size_t cuda_graphs() const;
  std::string profile_report() const;

  struct Impl;

 private:
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> p_;
};

}  // namespace kt
