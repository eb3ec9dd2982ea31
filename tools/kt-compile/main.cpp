// kt-compile: model.gguf [rules.yaml] -> plan.ktp. The pipeline (DESIGN.md
// "Passes"): import, apply-rules, place, place-experts (with --profile),
// absorb-mla, split-layers, lower,
// insert-transfers, plan-memory, then the plan is written. --emit prints a
// stage instead (mlir: the placed kt IR; exec-mlir: kt_exec; plan-json).
// Errors are one line on stderr and exit status 1; warnings are lines on stderr.
#include <cstdio>
#include <string>
#include <vector>

#include "dialects/KtDialect.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "passes/explain.h"
#include "passes/import_gguf.h"
#include "passes/rules/placement_math.h"
#include "passes/write_plan.h"
#include "runtime/plan_json.h"

#include <filesystem>
#include <fstream>
#include <chrono>
#include <functional>

namespace cl = llvm::cl;

static cl::opt<std::string> model_path(cl::Positional, cl::Required, cl::desc("<model.gguf>"));
static cl::opt<std::string> rules_path(cl::Positional, cl::init(""), cl::desc("[rules.yaml]"));
static cl::opt<std::string> emit("emit", cl::init(""), cl::value_desc("mlir|exec-mlir|plan-json"),
                                 cl::desc("print a stage instead of writing a plan"));
static cl::opt<bool> explain("explain", cl::desc("print a table: per op with weights its kernels, devices, "
                                                 "bytes, FLOPs per token, arithmetic intensity and why"));
static cl::opt<std::string> output("o", cl::init(""), cl::value_desc("plan.ktp"), cl::desc("output file"));
static cl::opt<std::string> config_path("config", cl::init(""), cl::value_desc("config.json"),
                                        cl::desc("Hugging Face config.json of the model"));
static cl::opt<std::string> gpu_mem("gpu-mem", cl::init("24GiB"), cl::value_desc("size"),
                                    cl::desc("GPU memory per GPU for placement (B, KiB, MiB, GiB, MB, GB; 0: CPU only)"));
static cl::opt<int> gpus("gpus", cl::init(1), cl::desc("number of GPUs (cuda:0 .. cuda:N-1)"));
static cl::opt<int64_t> ctx("ctx", cl::init(4096), cl::desc("context tokens the KV cache holds"));
static cl::opt<int64_t> prefill_len("prefill-len", cl::init(512),
                                    cl::desc("prompt tokens per prefill, for arithmetic intensity"));
static cl::opt<int64_t> ubatch("ubatch", cl::init(512), cl::desc("prompt tokens per prefill step"));
static cl::opt<int64_t> ubatch_long("ubatch-long", cl::init(2048),
                                    cl::desc("prompt tokens per step of a long prompt (prefill.long; at most --ctx): "
                                             "streamed experts cross PCIe, GPU-resident weights are read, once a step"));
static cl::opt<int64_t> max_batch("max-batch", cl::init(32),
                                  cl::desc("tokens per decode step, all sequences together (kt-serve --parallel)"));
static cl::opt<std::string> kv_type("kv-type", cl::init("f16"), cl::value_desc("f16|bf16|f32"),
                                    cl::desc("KV cache element type"));
static cl::opt<std::string> mla("mla", cl::init("auto"), cl::value_desc("auto|absorbed|decompressed"),
                                cl::desc("MLA form per phase (auto: decode absorbed, prefill as the rules say)"));

static cl::opt<std::string> profile("profile", cl::init(""), cl::value_desc("profile.json|random:SEED"),
                                    cl::desc("routing profile (kt-exec --routing-profile-out): the GPU memory left "
                                             "after placement holds the most used routed experts"));
static cl::opt<double> cpu_bandwidth("cpu-bandwidth", cl::init(80.0), cl::value_desc("GB/s"),
                                     cl::desc("CPU memory bandwidth for --profile's predicted decode tok/s "
                                              "(kt-bench prints the triad)"));
static cl::opt<int64_t> defer_experts("defer-experts", cl::init(0), cl::value_desc("K"),
                                      cl::desc("decode: each token's K weakest routed experts on the CPU are added "
                                               "after the next layer's attention, overlapping it (changes results "
                                               "slightly; 0: off)"));
static cl::opt<int64_t> defer_experts_prefill("defer-experts-prefill", cl::init(0), cl::value_desc("K"),
                                              cl::desc("the same for prefill"));
static cl::opt<std::string> stream_experts(
    "stream-experts", cl::init("auto"), cl::value_desc("auto|off|N"),
    cl::desc("prefill steps of at least N tokens compute the routed experts placed on the CPU on the GPU, "
             "copying their weights over each step (a second prefill phase); auto: from the length where "
             "the copies cost less than the CPU's GEMMs; off: never. A plan whose routed experts all live on "
             "GPUs keeps the phase for its longer steps (auto: past --ubatch)"));
static cl::opt<int64_t> split_experts_test("split-experts-test", cl::init(0), cl::Hidden, cl::value_desc("SEED"),
                                           cl::desc("tests: split every CPU experts op, a random half held by a "
                                                    "second CPU call (the hot-expert split without a GPU)"));
static cl::opt<bool> verbose("verbose", cl::desc("print each stage and its time on stderr (always for models over 1 GiB)"));
static cl::opt<std::string> last_pass("last-pass", cl::init(""), cl::value_desc("pass"),
                                       cl::desc("the last step to run: import, apply-rules, place (for tests "
                                                "and debugging; default: run every pass)"));

// The GGUF path as the plan records it: relative to the plan's folder, so a
// model and its plan can move together (to the device machine, say).
static std::string gguf_ref(const std::string& model, const std::string& plan_out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path abs_model = fs::absolute(model, ec);
  if (plan_out.empty() || plan_out == "-") return abs_model.lexically_normal().string();
  const fs::path dir = fs::absolute(plan_out, ec).parent_path();
  const fs::path rel = abs_model.lexically_normal().lexically_relative(dir.lexically_normal());
  return rel.empty() ? abs_model.string() : rel.string();
}

static int fail(const std::string& message) {
  std::fprintf(stderr, "kt-compile: %s\n", message.c_str());
  return 1;
}

int main(int argc, char** argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "kt-compile: GGUF model + rules -> kt IR / plan\n");
  if (!emit.empty() && emit != "mlir" && emit != "exec-mlir" && emit != "plan-json")
    return fail("--emit=" + emit + ": expected mlir, exec-mlir or plan-json");
  if (emit.empty() && !explain && output.empty()) return fail("nothing to do: give -o plan.ktp, --emit or --explain");
  std::string kv = kv_type;
  for (char& c : kv) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (kv != "F16" && kv != "BF16" && kv != "F32") return fail("--kv-type=" + kv_type + ": expected f16, bf16 or f32");
  if (mla != "auto" && mla != "absorbed" && mla != "decompressed")
    return fail("--mla=" + mla + ": expected auto, absorbed or decompressed");
  if (ctx < 0 || ubatch < 1 || max_batch < 1 || ubatch_long < 1)
    return fail("--ctx must not be negative, --ubatch, --ubatch-long and --max-batch must be positive");
  auto mem = kt::rules::parse_size(gpu_mem);
  if (!mem) return fail("--gpu-mem: " + mem.error().message);
  if (gpus < 1) return fail("--gpus must be at least 1");
  if (!last_pass.empty() && last_pass != "import" && last_pass != "apply-rules" && last_pass != "place")
    return fail("--last-pass=" + last_pass + ": expected import, apply-rules or place");
  if (prefill_len < 1) return fail("--prefill-len must be positive");
  if (defer_experts < 0 || defer_experts_prefill < 0) return fail("--defer-experts must not be negative");
  int64_t stream_from = -1;  // auto
  if (stream_experts == "off") {
    stream_from = 0;
  } else if (stream_experts != "auto") {
    llvm::StringRef v(stream_experts);
    if (v.getAsInteger(10, stream_from) || stream_from < 1)
      return fail("--stream-experts=" + stream_experts + ": expected auto, off or a positive token count");
  }

  mlir::MLIRContext context;
  // Progress on stderr for large models (or with --verbose): what each stage
  // did and how long it took, so a minute-long compile is not silent.
  std::error_code size_error;
  const uint64_t model_bytes = std::filesystem::file_size(model_path.getValue(), size_error);
  const bool progress = verbose || (!size_error && model_bytes >= (1ull << 30));
  auto t0 = std::chrono::steady_clock::now();
  auto stage = [&](const std::string& what) {
    if (!progress) return;
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "kt-compile: %s (%.2f s)\n", what.c_str(), std::chrono::duration<double>(now - t0).count());
    t0 = now;
  };
  auto module = kt::import_gguf(context, model_path, kt::ImportOptions{config_path});
  if (!module) return fail(module.error().message);
  stage("imported " + model_path + " (" + std::to_string(model_bytes >> 20) + " MiB)");

  // Pass diagnostics become our one-line messages: the passes put the place
  // (rules.yaml:12:5, a module path) at the start of the text. Warnings wait
  // for success, so a failed compile prints exactly its error.
  std::vector<std::string> warnings;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic& d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Warning) warnings.push_back(d.str());
    else if (d.getSeverity() == mlir::DiagnosticSeverity::Error) fail(d.str());
    return mlir::success();
  });
  // Everything up to the placed kt IR, which --emit=mlir and --explain show.
  mlir::PassManager pm(&context);
  if (last_pass != "import") {
    if (!rules_path.empty()) pm.addPass(kt::createApplyRules(kt::ApplyRulesOptions{rules_path, gpus}));
    if (last_pass != "apply-rules") {
      // Without a rules file every op is placed automatically.
      pm.addPass(kt::createPlace(kt::PlaceOptions{gpu_mem, gpus, prefill_len, ctx}));
      if (!profile.empty() || split_experts_test > 0)
        pm.addPass(kt::createPlaceExperts(
            kt::PlaceExpertsOptions{profile, model_path, cpu_bandwidth, split_experts_test}));
      // After placement: the better MLA form depends on the device.
      pm.addPass(kt::createAbsorbMla(kt::AbsorbMlaOptions{mla}));
    }
    if (last_pass.empty()) pm.addPass(kt::createSplitLayers(kt::SplitLayersOptions{gpus}));
  }
  if (mlir::failed(pm.run(module.value().get()))) return 1;
  stage("applied rules and placed every op");

  // --emit prints a stage to -o (default stdout); otherwise -o is the plan.
  // --explain prints its table to stdout either way.
  auto emit_text = [&](const std::function<void(llvm::raw_ostream&)>& print) {
    std::string error;
    auto out = mlir::openOutputFile(output.empty() ? "-" : output.getValue(), &error);
    if (!out) return fail(error);
    print(out->os());
    out->keep();
    return 0;
  };
  auto print_warnings = [&] {
    for (const std::string& w : warnings) std::fprintf(stderr, "kt-compile: warning: %s\n", w.c_str());
  };
  if (explain) kt::print_explain(module.value().get(), llvm::outs());
  if (emit == "mlir" || !last_pass.empty()) {
    print_warnings();
    if (emit.empty()) return 0;
    return emit_text([&](llvm::raw_ostream& os) { module.value()->print(os); os << "\n"; });
  }
  if (emit.empty() && output.empty()) {
    print_warnings();
    return 0;
  }

  // Lowering to the plan.
  mlir::PassManager lower(&context);
  lower.addPass(kt::createLowerToExec(kt::LowerToExecOptions{
      model_path, gguf_ref(model_path, emit.empty() ? output.getValue() : std::string()), ctx, ubatch, max_batch, kv,
      defer_experts, defer_experts_prefill, ubatch_long, stream_from}));
  lower.addPass(kt::createInsertTransfers());
  lower.addPass(kt::createFuseCalls());
  lower.addPass(kt::createPlanMemory());
  if (mlir::failed(lower.run(module.value().get()))) return 1;
  stage("lowered to kernel calls, transfers and arenas");
  print_warnings();
  if (emit == "exec-mlir")
    return emit_text([&](llvm::raw_ostream& os) { module.value()->print(os); os << "\n"; });
  kt::exec::PlanOp plan;
  module.value()->walk([&](kt::exec::PlanOp p) { plan = p; });
  auto bytes = kt::write_plan(plan, "kt-compile");
  if (!bytes.ok()) return fail(bytes.error().message);
  if (emit == "plan-json") {
    auto json = kt::plan_to_json(*bytes, "plan");
    if (!json.ok()) return fail(json.error().message);
    return emit_text([&](llvm::raw_ostream& os) { os << *json; });
  }
  std::ofstream f(output, std::ios::binary);
  if (!f || !f.write(reinterpret_cast<const char*>(bytes->data()), std::streamsize(bytes->size())))
    return fail(output + ": cannot write the plan");
  stage("wrote " + output + " (" + std::to_string(bytes->size() >> 10) + " KiB)");
  return 0;
}
