// kt's passes (DESIGN.md "Passes"), each testable alone in kt-opt.
#ifndef KT_PASSES_TD
#define KT_PASSES_TD

include "mlir/Pass/PassBase.td"

def ImportGguf : Pass<"kt-import-gguf", "::mlir::ModuleOp"> {
  let summary = "Import a GGUF model into the module as a kt.model";
  let description = [{
    Pass 1 of the pipeline, for kt-opt: appends the kt IR of a GGUF file
    (and optionally a Hugging Face config.json) to the module, as
    `kt-compile model.gguf --emit=mlir` prints it.
  }];
  let options = [
    Option<"file", "file", "std::string", /*default=*/"\"\"", "GGUF model file">,
    Option<"config", "config", "std::string", /*default=*/"\"\"",
           "Hugging Face config.json (keys the GGUF lacks; must agree otherwise)">,
  ];
  let dependentDialects = ["::kt::ir::KtDialect"];
}

#endif  // KT_PASSES_TD
