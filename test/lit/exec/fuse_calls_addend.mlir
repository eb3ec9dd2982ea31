// kt-fuse-calls alone, a sum folded into the residual's: cuda.add [b, c] -> [m]
// right before the GPU's add_rms_norm reading m (first or second), with
// nothing else reading m, becomes a third input of the norm (y = a + (b + c):
// the routed and shared experts' outputs and the residual). A sum read
// elsewhere, and the CPU's calls, stay as they are.
// RUN: kt-opt %s --kt-fuse-calls | FileCheck %s
// RUN: kt-opt %s --kt-fuse-calls --kt-fuse-calls | FileCheck %s

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 3 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "r" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "e" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "s" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "m" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "y" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "h" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "m2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "y2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "h2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "m3" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "y3" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "h3" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "z" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "logits" on "cuda:0" : "F32" x 64 per "outputs"
    kt_exec.call "cuda.add" on "cuda:0" ["e", "s"] -> ["m"] weights [] params {} layer 0 path "l0.moe_sum"
    kt_exec.call "cuda.add" on "cuda:0" ["r", "m"] -> ["y"] weights [] params {} layer 0 path "l0.residual"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["y"] -> ["h"] weights ["w1"] params {eps = 1.0e-06 : f64} layer 1 path "l1.norm"
    kt_exec.call "cuda.add" on "cuda:0" ["h", "s"] -> ["m2"] weights [] params {} layer 1 path "l1.moe_sum"
    kt_exec.call "cuda.add" on "cuda:0" ["m2", "y"] -> ["y2"] weights [] params {} layer 1 path "l1.residual"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["y2"] -> ["h2"] weights ["w2"] params {eps = 1.0e-06 : f64} layer 2 path "l2.norm"
    kt_exec.call "cuda.add" on "cuda:0" ["h2", "e"] -> ["m3"] weights [] params {} layer 2 path "l2.moe_sum"
    kt_exec.call "cuda.add" on "cuda:0" ["y2", "m3"] -> ["y3"] weights [] params {} layer 2 path "l2.residual"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["y3"] -> ["h3"] weights ["w3"] params {eps = 1.0e-06 : f64} layer 3 path "l3.norm"
    kt_exec.call "cuda.add" on "cuda:0" ["m3", "h3"] -> ["z"] weights [] params {} layer 3 path "l3.reads_m3"
    kt_exec.call "cuda.matmul" on "cuda:0" ["z"] -> ["logits"] weights ["wo"] params {} layer -1 path "lm_head"
  }
}

// CHECK-NOT: kt_exec.buffer "m"
// CHECK-NOT: kt_exec.buffer "m2"
// CHECK: kt_exec.buffer "m3"
// The sum as the residual add's second input...
// CHECK: kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["r", "e", "s"] -> ["y", "h"] weights ["w1"] params {eps = {{.*}} : f64} layer 1 path "l1.norm"
// ... and as its first: the residual goes first, the sum's terms after.
// CHECK-NEXT: kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["y", "h", "s"] -> ["y2", "h2"] weights ["w2"]
// A sum read by another call stays.
// CHECK-NEXT: kt_exec.call "cuda.add" on "cuda:0" ["h2", "e"] -> ["m3"]
// CHECK-NEXT: kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["y2", "m3"] -> ["y3", "h3"] weights ["w3"]
// CHECK-NEXT: kt_exec.call "cuda.add" on "cuda:0" ["m3", "h3"] -> ["z"]
// CHECK-NEXT: kt_exec.call "cuda.matmul"
// CHECK-NOT: kt_exec.call
