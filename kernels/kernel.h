// The kernel ABI: what a plan's call looks like to the kernel that runs it.
//
// A plan (runtime/plan.fbs) is a list of calls per phase; each call names a
// kernel ("cpu.matmul", "cuda.mla_decode", ...), its input and output
// activation buffers, its weights and its parameters. At load the runtime
// looks each name up in the one registry (kernels/registry.h) and asks the
// kernel's factory to bind the call (CallSpec): the factory checks shapes and
// parameters once, names what is wrong in one line, and returns a Kernel
// object that runs the call at every step (CallArgs) with nothing left to look
// up. The registry is the counterpart of IREE's HAL executables: the runtime
// never switches on kernel names itself.
//
// Everything here is plain data over raw pointers, so kernels depend on
// nothing above them (not on the runtime, the plan schema or MLIR).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/type_traits.h"

namespace kt::kern {

// ---- data ------------------------------------------------------------------

// An activation buffer as one step sees it: `rows` rows of `cols` elements,
// row-major, on the call's device. rows is this step's (tokens or selected
// outputs), at most max_rows, which the plan sized the buffer for.
struct Act {
  void* data = nullptr;
  GgmlType type = GgmlType::F32;  // F32, F16, BF16 or I32
  int64_t cols = 0;
  int64_t rows = 0;
  int64_t max_rows = 0;

  float* f32() const { return static_cast<float*>(data); }
  int32_t* i32() const { return static_cast<int32_t*>(data); }
  float* row(int64_t r) const { return f32() + r * cols; }
};

// A weight tensor as bound on the call's device (a device pointer for GPU
// calls; what a CPU factory may read at bind is then `host`): ggml order (ne[0] fastest),
// nb[i] the byte stride of dimension i (nb[0] is the type size; rows of a
// block type are nb[1] apart). Expert tensors are [n_in, n_out, n_expert].
// How a weight's bytes are laid out where `data` points.
//  Gguf: as in the file (ggml's blocks, nb below).
//  Int8: repacked at load to matmul_i8's int8 blocks (kernels/cpu/matmul_i8.h;
//    KTransformers' AMXInt8), one matrix per slice, i8_matrix_bytes(ne[0],
//    ne[1]) apart. `host` and nb still describe the file's bytes, which the
//    reference kernels read. Only factories that say so take it (Binder).
//  Int4: the same with matmul_i8's int4 blocks (KTransformers' AMXInt4), one
//    matrix per slice, i8_matrix_bytes(ne[0], ne[1], WeightBits::Int4) apart.
enum class WeightLayout { Gguf, Int8, Int4 };
// The plan's name of a layout ("gguf", "int8", "int4").
constexpr const char* layout_name(WeightLayout l) {
  return l == WeightLayout::Int4 ? "int4" : l == WeightLayout::Int8 ? "int8" : "gguf";
}

struct WeightView {
  const void* data = nullptr;
  GgmlType type = GgmlType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t nb[4] = {0, 0, 0, 0};
  std::string_view name;  // the GGUF tensor, for messages
  const void* host = nullptr;  // the same bytes in host memory (the GGUF mapping)
  WeightLayout layout = WeightLayout::Gguf;

  int64_t n_in() const { return ne[0]; }
  int64_t n_out() const { return ne[1]; }
  int64_t n_mat() const { return ne[2]; }
  uint64_t row_bytes() const { return nb[1]; }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data); }
  const uint8_t* mat(int64_t e) const { return bytes() + uint64_t(e) * nb[2]; }
  const uint8_t* row(int64_t r, int64_t e = 0) const { return mat(e) + uint64_t(r) * nb[1]; }
  const float* f32() const { return static_cast<const float*>(data); }
  // nb for `type` and ne as GGUF packs a tensor: rows of whole blocks, one
  // after another, matrices after matrices.
  void set_packed_strides() {
    nb[0] = type_traits(type).type_size;
    nb[1] = type_traits(type).row_bytes(ne[0]);
    nb[2] = nb[1] * uint64_t(ne[1]);
    nb[3] = nb[2] * uint64_t(ne[2]);
  }
};

// The KV cache of one layer on the call's device, all sequence slots:
// k: [n_slots][n_ctx][k_cols], v: [n_slots][n_ctx][v_cols] of `type`.
//  Kv:        k_cols = n_kv_heads * head_dim_k, v_cols = n_kv_heads * head_dim_v
//  MlaLatent: k_cols = kv_lora_rank (the normed latent), v_cols = rope dims (k_pe)
struct KvView {
  enum class Kind { Kv, MlaLatent };
  Kind kind = Kind::Kv;
  GgmlType type = GgmlType::F32;  // F32, F16 or BF16
  int64_t n_slots = 0;
  int64_t n_ctx = 0;
  int64_t n_kv_heads = 0;  // Kv only
  int64_t k_cols = 0;
  int64_t v_cols = 0;
  void* k = nullptr;
  void* v = nullptr;

  uint64_t elem_bytes() const { return type_traits(type).type_size; }
  void* k_row(int64_t slot, int64_t pos) const {
    return static_cast<uint8_t*>(k) + uint64_t((slot * n_ctx + pos) * k_cols) * elem_bytes();
  }
  void* v_row(int64_t slot, int64_t pos) const {
    return static_cast<uint8_t*>(v) + uint64_t((slot * n_ctx + pos) * v_cols) * elem_bytes();
  }
};

// The tokens of one step. They may belong to several sequences (continuous
// batching): token t is at position pos[t] of the sequence in KV slot slot[t].
// Tokens of one sequence are consecutive and in position order, and a token
// attends to its sequence's cache up to and including its own position.
// outputs: the token rows whose logits are wanted, in order (select_rows).
struct Step {
  int64_t n_tokens = 0;
  const int32_t* tokens = nullptr;
  const int32_t* pos = nullptr;
  const int32_t* slot = nullptr;
  int64_t n_outputs = 0;
  const int32_t* outputs = nullptr;
};

// ---- services the runtime gives kernels -------------------------------------

// The runtime's thread pool, behind the smallest interface kernels need.
class Parallel {
 public:
  virtual ~Parallel() = default;
  virtual int n_threads() const = 0;
  // Runs fn(begin, end, thread) over [0, n) split into contiguous chunks, one
  // per thread at most, and returns when all are done. thread < n_threads().
  virtual void for_range(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) = 0;
};

// One MoE layer's routing decision for a step, as a router kernel made it.
struct RouteEvent {
  int layer = -1;
  const Step* step = nullptr;
  int64_t n_expert = 0;
  int64_t n_used = 0;
  const float* logits = nullptr;   // the router's output [n_tokens][n_expert]
  const float* margins = nullptr;  // [n_tokens]: how far each choice is from a tie
  int32_t* ids = nullptr;          // [n_tokens][n_used], best first; may be rewritten
  float* weights = nullptr;        // [n_tokens][n_used]; may be rewritten
  // Re-chooses token t's experts with the runner-up in place of its k-th
  // weakest choice, k >= 1 (the choice another implementation makes when a
  // near tie tips; ref::moe_route's take_runner_up).
  std::function<void(int64_t t, int k)> take_runner_up;
};

// Sees (and may change) every routing decision: routing profiles, forced
// routing in benchmarks, tests that tip near-tied choices. Router kernels call
// it after choosing, before the experts run.
class RoutingHook {
 public:
  virtual ~RoutingHook() = default;
  virtual void on_route(RouteEvent& e) = 0;
  // Nonzero: this hook only forces every token's experts uniformly at random
  // (n_used distinct of n_expert, the router's weights kept) and needs to see
  // nothing, so a GPU router may draw them itself, from this seed, the layer
  // and the token's slot and position, without calling on_route: the step
  // then stays on the GPU (recorded, gated) as it does without a hook. The
  // draws are not those on_route would make; their distribution is.
  virtual uint64_t device_uniform_seed() const { return 0; }
};

// ---- binding ------------------------------------------------------------------

// A call's parameter (plan.fbs Param): one of an integer, a float, a string,
// or lists of them.
struct Param {
  std::string key;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

// How faithfully reference kernels round (ops_ref.h ActRounding): GgmlCpu, the
// default, is what the fast CPU kernels compute (activations quantized to the
// weight type's 8-bit blocks); Exact computes in double from the floats.
enum class Rounding { GgmlCpu, Exact };

// Which implementation a factory may pick: Fast chooses by the CPU's features
// (falling back to the reference); Reference forces the reference kernels,
// for tests that compare the two over whole models.
enum class Impl { Fast, Reference };

// The shape of one activation buffer, as the plan declares it.
struct ActShape {
  GgmlType type = GgmlType::F32;
  int64_t cols = 0;
  int64_t max_rows = 0;
};

// Everything a factory may look at while binding a call.
struct CallSpec {
  std::string_view kernel;
  std::string_view path;  // module path, for messages
  int layer = -1;
  std::vector<ActShape> in, out;
  std::vector<WeightView> weights;  // bound: data valid, may be read (e.g. to repack)
  std::vector<Param> params;
  const KvView* kv = nullptr;  // the layer's cache (shape; data valid) or null
  Rounding rounding = Rounding::GgmlCpu;
  Impl impl = Impl::Fast;
  int device = -1;  // the CUDA ordinal of a GPU call; -1 on the CPU

  const Param* find(std::string_view key) const;
};

// What a kernel gets at every step.
struct CallArgs {
  std::span<const Act> in;
  std::span<const Act> out;
  std::span<const WeightView> weights;
  const KvView* kv = nullptr;
  const Step* step = nullptr;
  Parallel* par = nullptr;
  RoutingHook* routing = nullptr;  // may be null
  int layer = -1;
  // GPU calls: the device's queue (a cudaStream_t) the kernel launches on,
  // asynchronously; data pointers are device pointers. Null on the CPU.
  void* queue = nullptr;
  // Host flags of a gated step (runtime/executor_recorded.cpp), given only to a
  // kernel whose takes_flags() is true (else the runtime queues its own flag
  // kernels around the call): page-locked words the GPU maps. The call's work
  // on the queue first waits for await_flag to read 1 (the host's "done") and
  // clears it; signal_flag is set to 1 once the call's writes reached host
  // memory ("landed"). Null: none.
  uint32_t* await_flag = nullptr;
  uint32_t* signal_flag = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Runs the call. Inputs were validated at bind time; nothing here can fail
  // on valid inputs (a kernel needing scratch sized it at bind).
  virtual void run(const CallArgs& a) = 0;
  // "avx512-vnni", "reference", ...: what bind chose, for --verbose and benchmarks.
  virtual std::string_view impl() const { return "reference"; }
  // Copies between devices, the only calls whose buffers live on two devices.
  // They run after run() returns, on the queue: an upload reads its input's
  // host bytes later, a download writes its output's host bytes later, so the
  // runtime keeps CPU calls off those bytes until the copy's event (without
  // waiting for the whole queue); a peer copy reads another GPU's buffer, so
  // the runtime first lets that GPU's queue finish.
  enum class Transfer { None, Upload, Download, Peer };
  virtual Transfer transfer() const { return Transfer::None; }
  // GPU calls: whether what run(a) issues on the queue may be recorded and
  // replayed for a later step with the same row counts and graph_key() (no
  // host reads or waits, nothing taken from the step on the host but
  // graph_key()'s inputs; DeviceApi's recorded work). graph_key(a): the launch
  // shapes run(a) derives from the step's positions (attention's split of the
  // cache), 0 when none.
  virtual bool capturable(const CallArgs& a) const {
    (void)a;
    return false;
  }
  virtual uint64_t graph_key(const CallArgs& a) const {
    (void)a;
    return 0;
  }
  // Host copies: whether run() honours CallArgs' await_flag and signal_flag,
  // so a gated step's hand-off is one kernel rather than three.
  virtual bool takes_flags() const { return false; }
};

// Binds a call: returns the kernel object, or sets *error to one line (without
// the call's place, which the runtime adds) and returns null.
using KernelFactory = std::unique_ptr<Kernel> (*)(const CallSpec& spec, std::string* error);

}  // namespace kt::kern
