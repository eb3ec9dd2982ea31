// kt-insert-transfers joins the downloads out of one run of a GPU's calls into
// one call at the run's last download (kernels/cuda/cuda_copy.cu carries them
// in one kernel with the gated step's flag); a call of another device ends a
// run, and downloads of different runs stay apart.
// RUN: kt-opt %s --kt-insert-transfers | FileCheck %s
// RUN: kt-opt %s --kt-insert-transfers --kt-insert-transfers | FileCheck %s --check-prefix=TWICE

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 2 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "x" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "h" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "ids" on "cuda:0" : "I32" x 2 per "tokens"
    kt_exec.buffer "w" on "cuda:0" : "F32" x 2 per "tokens"
    kt_exec.buffer "s" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "e" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "y" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "h2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "ids2" on "cuda:0" : "I32" x 2 per "tokens"
    kt_exec.buffer "w2" on "cuda:0" : "F32" x 2 per "tokens"
    kt_exec.buffer "e2" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "logits" on "cpu" : "F32" x 64 per "outputs"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["x"] -> ["h"] weights [] params {} layer 0 path "l0.norm"
    kt_exec.call "cuda.moe_gate" on "cuda:0" ["h"] -> ["ids", "w"] weights [] params {} layer 0 path "l0.gate"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["s"] weights [] params {} layer 0 path "l0.shared"
    kt_exec.call "cpu.moe_experts" on "cpu" ["h", "ids", "w"] -> ["e"] weights [] params {} layer 0 path "l0.experts"
    kt_exec.call "cuda.add" on "cuda:0" ["s", "e"] -> ["y"] weights [] params {} layer 0 path "l0.add"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["y"] -> ["h2"] weights [] params {} layer 1 path "l1.norm"
    kt_exec.call "cuda.moe_gate" on "cuda:0" ["h2"] -> ["ids2", "w2"] weights [] params {} layer 1 path "l1.gate"
    kt_exec.call "cpu.moe_experts" on "cpu" ["h2", "ids2", "w2"] -> ["e2"] weights [] params {} layer 1 path "l1.experts"
    kt_exec.call "cpu.matmul" on "cpu" ["e2"] -> ["logits"] weights [] params {} layer -1 path "lm_head"
  }
}

// The normed rows would come down right after the norm, the routing right
// after the router; joined, all three come down after the router, in one call
// where the last of them was, before the shared expert's product.
// CHECK: kt_exec.call "cuda.rms_norm" on "cuda:0" ["x"] -> ["h"]
// CHECK-NEXT: kt_exec.call "cuda.moe_gate" on "cuda:0" ["h"] -> ["ids", "w"]
// CHECK-NEXT: kt_exec.call "cuda.download" on "cuda:0" ["h", "ids", "w"] -> ["h@cpu", "ids@cpu", "w@cpu"] weights [] params {} layer 0 path "l0.experts"
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["s"]
// CHECK-NEXT: kt_exec.call "cpu.moe_experts" on "cpu" ["h@cpu", "ids@cpu", "w@cpu"] -> ["e"]
// The next run (after the CPU call) has its own.
// CHECK-NEXT: kt_exec.call "cuda.upload" on "cuda:0" ["e"] -> ["e@cuda:0"]
// CHECK-NEXT: kt_exec.call "cuda.add"
// CHECK-NEXT: kt_exec.call "cuda.rms_norm" on "cuda:0" ["y"] -> ["h2"]
// CHECK-NEXT: kt_exec.call "cuda.moe_gate"
// CHECK-NEXT: kt_exec.call "cuda.download" on "cuda:0" ["h2", "ids2", "w2"] -> ["h2@cpu", "ids2@cpu", "w2@cpu"]
// CHECK-NEXT: kt_exec.call "cpu.moe_experts"
// CHECK-NEXT: kt_exec.call "cpu.matmul"
// CHECK-NOT: kt_exec.call

// Idempotent.
// TWICE-COUNT-12: kt_exec.call
// TWICE-NOT: kt_exec.call
