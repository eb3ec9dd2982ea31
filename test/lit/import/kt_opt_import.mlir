// The importer as a pass: kt-opt starts from a GGUF file, as kt-compile does.
// RUN: kt-opt %s --kt-import-gguf=file=%test_data/tiny-llama-F32.gguf | FileCheck %s
// RUN: kt-compile %test_data/tiny-llama-F32.gguf --emit=mlir --last-pass=import > %t.compile.mlir
// RUN: kt-opt %s --kt-import-gguf=file=%test_data/tiny-llama-F32.gguf > %t.opt.mlir
// RUN: diff %t.compile.mlir %t.opt.mlir
// RUN: not kt-opt %s --kt-import-gguf=file=%t.nothere.gguf 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not kt-opt %s --kt-import-gguf 2>&1 | FileCheck %s --check-prefix=NOFILE

// CHECK:      module {
// CHECK-NEXT: kt.model "" class "ktransformers.models.modeling_llama.LlamaForCausalLM" arch "llama"
// CHECK:      kt.lm_head "lm_head"
// ERR:    error: {{.*}}nothere.gguf
// NOFILE: error: kt-import-gguf needs file=<model.gguf>
