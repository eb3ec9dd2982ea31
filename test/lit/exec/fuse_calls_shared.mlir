// kt-fuse-calls alone, the shared experts beside the routed ones: a GPU
// SwiGLU product of x (cuda.matmul_glu), the one product of its output (the
// shared down), then cuda.moe_experts of x become cuda.moe_ffn where the
// experts were, with both outputs and the six weights (routed, then shared).
// Not when the shared output is read before the experts, when the SwiGLU's
// output has another reader, or for experts streamed from the host.
// RUN: kt-opt %s --kt-fuse-calls | FileCheck %s
// RUN: kt-opt %s --kt-fuse-calls --kt-fuse-calls | FileCheck %s

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 3 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "h" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "ids" on "cuda:0" : "I32" x 2 per "tokens"
    kt_exec.buffer "w" on "cuda:0" : "F32" x 2 per "tokens"
    kt_exec.buffer "a" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "s" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "e" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "a2" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "s2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "t2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "e2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "a3" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "s3" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "e3" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "y" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "logits" on "cuda:0" : "F32" x 64 per "outputs"
    kt_exec.call "cuda.moe_gate" on "cuda:0" ["h"] -> ["ids", "w"] weights ["r"] params {n_used = 2 : i64} layer 0 path "l0.gate"
    kt_exec.call "cuda.matmul_glu" on "cuda:0" ["h"] -> ["a"] weights ["sg", "su"] params {} layer 0 path "l0.shared"
    kt_exec.call "cuda.matmul" on "cuda:0" ["a"] -> ["s"] weights ["sd"] params {} layer 0 path "l0.shared_down"
    kt_exec.call "cuda.moe_experts" on "cuda:0" ["h", "ids", "w"] -> ["e"] weights ["g", "u", "d"] params {} layer 0 path "l0.experts"
    kt_exec.call "cuda.matmul_glu" on "cuda:0" ["e"] -> ["a2"] weights ["sg", "su"] params {} layer 1 path "l1.shared"
    kt_exec.call "cuda.matmul" on "cuda:0" ["a2"] -> ["s2"] weights ["sd"] params {} layer 1 path "l1.shared_down"
    kt_exec.call "cuda.add" on "cuda:0" ["s2", "s"] -> ["t2"] weights [] params {} layer 1 path "l1.reads_s2"
    kt_exec.call "cuda.moe_experts" on "cuda:0" ["e", "ids", "w"] -> ["e2"] weights ["g", "u", "d"] params {} layer 1 path "l1.experts"
    kt_exec.call "cuda.matmul_glu" on "cuda:0" ["t2"] -> ["a3"] weights ["sg", "su"] params {} layer 2 path "l2.shared"
    kt_exec.call "cuda.matmul" on "cuda:0" ["a3"] -> ["s3"] weights ["sd"] params {} layer 2 path "l2.shared_down"
    kt_exec.call "cuda.moe_experts" on "cuda:0" ["t2", "ids", "w"] -> ["e3"] weights ["g", "u", "d"] params {streamed = 1 : i64} layer 2 path "l2.experts"
    kt_exec.call "cuda.add" on "cuda:0" ["e3", "s3"] -> ["y"] weights [] params {} layer 2 path "l2.sum"
    kt_exec.call "cuda.add" on "cuda:0" ["y", "e2"] -> ["logits"] weights [] params {} layer -1 path "lm_head"
  }
}

// The SwiGLU's output buffer goes with its calls.
// CHECK-NOT: kt_exec.buffer "a" on
// CHECK: kt_exec.buffer "a2"
// CHECK: kt_exec.call "cuda.moe_gate"
// CHECK-NEXT: kt_exec.call "cuda.moe_ffn" on "cuda:0" ["h", "ids", "w"] -> ["e", "s"] weights ["g", "u", "d", "sg", "su", "sd"] params {} layer 0 path "l0.experts"
// The shared output read before the experts: left as it is.
// CHECK-NEXT: kt_exec.call "cuda.matmul_glu" on "cuda:0" ["e"] -> ["a2"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["a2"] -> ["s2"]
// CHECK-NEXT: kt_exec.call "cuda.add" on "cuda:0" ["s2", "s"]
// CHECK-NEXT: kt_exec.call "cuda.moe_experts" on "cuda:0" ["e", "ids", "w"] -> ["e2"]
// Streamed experts: left as they are.
// CHECK-NEXT: kt_exec.call "cuda.matmul_glu" on "cuda:0" ["t2"] -> ["a3"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["a3"] -> ["s3"]
// CHECK-NEXT: kt_exec.call "cuda.moe_experts" on "cuda:0" ["t2", "ids", "w"] -> ["e3"]
// CHECK-NEXT: kt_exec.call "cuda.add"
// CHECK-NEXT: kt_exec.call "cuda.add"
// CHECK-NOT: kt_exec.call
