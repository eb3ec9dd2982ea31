// kt-compile: model.gguf [rules.yaml] -> kt IR (and, as the later passes land,
// an execution plan). Errors are one line on stderr and exit status 1.
#include <cstdio>
#include <string>

#include "dialects/KtDialect.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/MLIRContext.h"
#include "passes/import_gguf.h"

namespace cl = llvm::cl;

static cl::opt<std::string> model_path(cl::Positional, cl::Required, cl::desc("<model.gguf>"));
static cl::opt<std::string> rules_path(cl::Positional, cl::init(""), cl::desc("[rules.yaml]"));
static cl::opt<std::string> emit("emit", cl::init(""), cl::value_desc("mlir"),
                                 cl::desc("print the compiled model instead of writing a plan"));
static cl::opt<std::string> config_path("config", cl::init(""), cl::value_desc("config.json"),
                                        cl::desc("Hugging Face config.json of the model"));

static int fail(const std::string& message) {
  std::fprintf(stderr, "kt-compile: %s\n", message.c_str());
  return 1;
}

int main(int argc, char** argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "kt-compile: GGUF model + rules -> kt IR / plan\n");
  if (emit != "mlir") return fail("only --emit=mlir is implemented so far");
  if (!rules_path.empty()) {
    // Rule application is the next pass to land; say so rather than pretend.
    if (!llvm::sys::fs::exists(rules_path)) return fail(rules_path + ": no such file");
    std::fprintf(stderr, "kt-compile: note: %s is not applied yet (rules are a later pass)\n",
                 rules_path.c_str());
  }

  mlir::MLIRContext context;
  auto module = kt::import_gguf(context, model_path, kt::ImportOptions{config_path});
  if (!module) return fail(module.error().message);
  module.value()->print(llvm::outs());
  llvm::outs() << "\n";
  return 0;
}
