// kt-opt: mlir-opt with the kt dialect and kt's passes, for lit tests and pass
// debugging (`kt-opt --kt-import-gguf=file=m.gguf in.mlir`).
#include "dialects/KtDialect.h"
#include "dialects/KtExecDialect.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "passes/Passes.h"

int main(int argc, char** argv) {
  kt::registerKtPasses();
  mlir::DialectRegistry registry;
  registry.insert<kt::ir::KtDialect, kt::exec::KtExecDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "kt optimizer driver\n", registry));
}
