// kt-compile: model.gguf [rules.yaml] -> kt IR after the rule and placement
// passes (and, once lowering lands, an execution plan). Errors are one line on
// stderr and exit status 1; warnings are lines on stderr.
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

namespace cl = llvm::cl;

static cl::opt<std::string> model_path(cl::Positional, cl::Required, cl::desc("<model.gguf>"));
static cl::opt<std::string> rules_path(cl::Positional, cl::init(""), cl::desc("[rules.yaml]"));
static cl::opt<std::string> emit("emit", cl::init(""), cl::value_desc("mlir"),
                                 cl::desc("print the compiled model instead of writing a plan"));
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

static cl::opt<std::string> last_pass("last-pass", cl::init(""), cl::value_desc("pass"),
                                       cl::desc("the last step to run: import, apply-rules, place (for tests "
                                                "and debugging; default: run every pass)"));

static int fail(const std::string& message) {
  std::fprintf(stderr, "kt-compile: %s\n", message.c_str());
  return 1;
}

int main(int argc, char** argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "kt-compile: GGUF model + rules -> kt IR / plan\n");
  if (!emit.empty() && emit != "mlir") return fail("--emit=" + emit + ": only --emit=mlir is implemented");
  if (emit.empty() && !output.empty())
    return fail("-o " + output + ": writing a plan needs the lowering pass, which is not implemented yet; use --emit=mlir or --explain");
  if (emit.empty() && !explain) return fail("nothing to do: give --emit=mlir or --explain (plan writing is not implemented yet)");
  auto mem = kt::rules::parse_size(gpu_mem);
  if (!mem) return fail("--gpu-mem: " + mem.error().message);
  if (gpus < 1) return fail("--gpus must be at least 1");
  if (!last_pass.empty() && last_pass != "import" && last_pass != "apply-rules" && last_pass != "place")
    return fail("--last-pass=" + last_pass + ": expected import, apply-rules or place");
  if (ctx < 0 || prefill_len < 1) return fail("--ctx must not be negative and --prefill-len must be positive");

  mlir::MLIRContext context;
  auto module = kt::import_gguf(context, model_path, kt::ImportOptions{config_path});
  if (!module) return fail(module.error().message);

  // Pass diagnostics become our one-line messages: the passes put the place
  // (rules.yaml:12:5, a module path) at the start of the text. Warnings wait
  // for success, so a failed compile prints exactly its error.
  std::vector<std::string> warnings;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic& d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Warning) warnings.push_back(d.str());
    else if (d.getSeverity() == mlir::DiagnosticSeverity::Error) fail(d.str());
    return mlir::success();
  });
  mlir::PassManager pm(&context);
  if (last_pass != "import") {
    if (!rules_path.empty()) pm.addPass(kt::createApplyRules(kt::ApplyRulesOptions{rules_path, gpus}));
    // Without a rules file every op is placed automatically.
    if (last_pass != "apply-rules") pm.addPass(kt::createPlace(kt::PlaceOptions{gpu_mem, gpus, prefill_len, ctx}));
    if (last_pass.empty()) pm.addPass(kt::createSplitLayers(kt::SplitLayersOptions{gpus}));
  }
  if (mlir::failed(pm.run(module.value().get()))) return 1;
  for (const std::string& w : warnings) std::fprintf(stderr, "kt-compile: warning: %s\n", w.c_str());

  std::string error;
  auto out = mlir::openOutputFile(output.empty() ? "-" : output.getValue(), &error);
  if (!out) return fail(error);
  if (emit == "mlir") {
    module.value()->print(out->os());
    out->os() << "\n";
  }
  if (explain) kt::print_explain(module.value().get(), out->os());
  out->keep();
  return 0;
}
