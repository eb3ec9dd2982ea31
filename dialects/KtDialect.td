// The kt dialect: the model as the module tree rule writers know from Hugging
// Face code. It is structural: ops are modules (with attributes, weights as
// references into the GGUF file, and for composites one region holding their
// children); there is no SSA dataflow, because what each module computes is
// fixed by its kind and implemented by the runtime's kernels.
#ifndef KT_DIALECT_TD
#define KT_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Kt_Dialect : Dialect {
  let name = "kt";
  let cppNamespace = "::kt::ir";
  let summary = "Model-level IR mirroring the Hugging Face module tree";
  let useDefaultAttributePrinterParser = 1;
  // Plain attribute dictionaries: the ops are attribute-heavy and properties
  // roughly double the generated code (compile time) for no gain here.
  let usePropertiesForAttributes = 0;
  let extraClassDeclaration = [{
    // In KtAttrs.cpp, where the attribute storage classes are complete.
    void registerAttributes();
  }];
}

class Kt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kt_Dialect, mnemonic, traits>;

// Every kt op is a module of the model: it has a module path and a class name,
// which is what KTransformers rules match (`name:` regex and `class:`).
def Kt_ModuleInterface : OpInterface<"ModuleInterface"> {
  let cppNamespace = "::kt::ir";
  let description = [{
    A module of the model. `path` is its Hugging Face module path
    ("model.layers.3.mlp.experts"), `hf_class` the Python class a rule's
    `class:` names, `options` what later passes attach (devices, kernels).
  }];
  let methods = [
    InterfaceMethod<"Hugging Face module path", "::llvm::StringRef", "getPath">,
    InterfaceMethod<"Hugging Face / KTransformers class name", "::llvm::StringRef",
                    "getHfClass">,
    InterfaceMethod<"options attached by passes (may be null)", "::mlir::DictionaryAttr",
                    "getOptionsAttr">,
    InterfaceMethod<"replaces the options", "void", "setOptionsAttr",
                    (ins "::mlir::DictionaryAttr":$options)>,
  ];
  // A child's path extends its parent's: rules match paths, so they must be
  // exactly what the module tree says.
  let verify = [{ return ::kt::ir::verifyModulePath($_op); }];
}

#endif  // KT_DIALECT_TD
