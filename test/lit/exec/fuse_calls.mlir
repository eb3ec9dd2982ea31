// kt-fuse-calls alone: a residual sum followed by the norm of its result over
// whole rows, on one device, becomes one add_rms_norm call with both outputs;
// a norm per group of columns, a pair across devices, and a pair split by a
// copy stay as they are.
// RUN: kt-opt %s --kt-fuse-calls | FileCheck %s
// RUN: kt-opt %s --kt-fuse-calls --kt-fuse-calls | FileCheck %s --check-prefix=TWICE

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 2 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "x" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "a" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "x1" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "h1" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "x2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "x2@cpu" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "h2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "x3" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "h3" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "c" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "h4" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "x5" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "h5" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "logits" on "cpu" : "F32" x 64 per "outputs"
    kt_exec.call "cuda.add" on "cuda:0" ["x", "a"] -> ["x1"] weights [] params {} layer 0 path "l0.add"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["x1"] -> ["h1"] weights ["blk.1.attn_norm.weight"] params {eps = 1.0e-06 : f64} layer 1 path "l1.attn_norm"
    kt_exec.call "cuda.add" on "cuda:0" ["x1", "h1"] -> ["x2"] weights [] params {} layer 1 path "l1.add"
    kt_exec.call "cuda.download" on "cuda:0" ["x2"] -> ["x2@cpu"] weights [] params {} layer 1 path "l1.add"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["x2"] -> ["h2"] weights ["w2"] params {eps = 1.0e-06 : f64} layer 1 path "l1.ffn_norm"
    kt_exec.call "cuda.add" on "cuda:0" ["x2", "h2"] -> ["x3"] weights [] params {} layer 1 path "l1.add2"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["x3"] -> ["h3"] weights ["w3"] params {eps = 1.0e-06 : f64, group = 16 : i64} layer 1 path "l1.q_norm"
    kt_exec.call "cpu.add" on "cpu" ["x2@cpu", "x2@cpu"] -> ["c"] weights [] params {} layer 1 path "l1.cpu_add"
    kt_exec.call "cpu.rms_norm" on "cpu" ["c"] -> ["h4"] weights ["w4"] params {eps = 1.0e-05 : f64, group = 64 : i64} layer 1 path "l1.cpu_norm"
    kt_exec.call "cuda.add" on "cuda:0" ["x3", "x3"] -> ["x5"] weights [] params {} layer 1 path "l1.gpu_add"
    kt_exec.call "cpu.rms_norm" on "cpu" ["x5"] -> ["h5"] weights ["w5"] params {eps = 1.0e-05 : f64} layer 1 path "l1.cpu_norm2"
    kt_exec.call "cpu.matmul" on "cpu" ["h5"] -> ["logits"] weights [] params {} layer -1 path "lm_head"
  }
}

// The pair becomes one call with the norm's weight, eps, layer and path.
// CHECK: kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["x", "a"] -> ["x1", "h1"] weights ["blk.1.attn_norm.weight"] params {eps = {{.*}} : f64} layer 1 path "l1.attn_norm"
// A copy of the sum between them keeps them apart.
// CHECK-NEXT: kt_exec.call "cuda.add" on "cuda:0" ["x1", "h1"] -> ["x2"]
// CHECK-NEXT: kt_exec.call "cuda.download"
// CHECK-NEXT: kt_exec.call "cuda.rms_norm" on "cuda:0" ["x2"] -> ["h2"]
// A norm per group of 16 columns of 64 stays alone...
// CHECK-NEXT: kt_exec.call "cuda.add" on "cuda:0" ["x2", "h2"] -> ["x3"]
// CHECK-NEXT: kt_exec.call "cuda.rms_norm" on "cuda:0" ["x3"] -> ["h3"]
// ... one group of the whole row is a whole-row norm (on the CPU too) ...
// CHECK-NEXT: kt_exec.call "cpu.add_rms_norm" on "cpu" ["x2@cpu", "x2@cpu"] -> ["c", "h4"] weights ["w4"] params {eps = 1.000000e-05 : f64}
// ... and a pair across devices is not a pair.
// CHECK-NEXT: kt_exec.call "cuda.add" on "cuda:0" ["x3", "x3"] -> ["x5"]
// CHECK-NEXT: kt_exec.call "cpu.rms_norm" on "cpu" ["x5"] -> ["h5"]
// CHECK-NEXT: kt_exec.call "cpu.matmul"

// Idempotent: nothing left to join the second time.
// TWICE-COUNT-10: kt_exec.call
// TWICE-NOT: kt_exec.call
