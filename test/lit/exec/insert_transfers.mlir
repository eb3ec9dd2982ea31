// kt-insert-transfers alone: a call reading a buffer of another device reads a
// mirror on its own device, filled once by a copy just before its first reader;
// logits computed on a GPU are brought to the host.
// RUN: kt-opt %s --kt-insert-transfers | FileCheck %s
// RUN: kt-opt %s --kt-insert-transfers --kt-insert-transfers | FileCheck %s --check-prefix=TWICE

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 1 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.device "cuda:1" {index = 1 : i64, kind = "cuda"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "x" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "h" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "e" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "s" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "y" on "cuda:1" : "F32" x 64 per "tokens"
    kt_exec.buffer "logits" on "cuda:1" : "F32" x 64 per "outputs"
    kt_exec.call "cpu.embed" on "cpu" [] -> ["x"] weights [] params {} layer -1 path "embed"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["x"] -> ["h"] weights [] params {} layer 0 path "norm"
    kt_exec.call "cpu.moe_experts" on "cpu" ["h", "h"] -> ["e"] weights [] params {} layer 0 path "experts"
    kt_exec.call "cuda.silu_mul" on "cuda:0" ["h", "x"] -> ["s"] weights [] params {} layer 0 path "shared"
    kt_exec.call "cuda.add" on "cuda:1" ["s", "e"] -> ["y"] weights [] params {} layer 0 path "combine"
    kt_exec.call "cuda.matmul" on "cuda:1" ["y"] -> ["logits"] weights [] params {} layer -1 path "lm_head"
  }
}

// CHECK: kt_exec.phase "decode" {{.*}}logits "logits@cpu"
// CHECK: kt_exec.buffer "x@cuda:0" on "cuda:0"
// CHECK: kt_exec.buffer "h@cpu" on "cpu"
// CHECK: kt_exec.buffer "e@cuda:1" on "cuda:1"
// CHECK: kt_exec.buffer "s@cuda:1" on "cuda:1"
// CHECK: kt_exec.buffer "logits@cpu" on "cpu"
// CHECK: kt_exec.call "cpu.embed"
// Each copy right after the call that writes its source, as early as the data
// exists: the host's embedding goes up to the GPU once...
// CHECK-NEXT: kt_exec.call "cuda.upload" on "cuda:0" ["x"] -> ["x@cuda:0"]
// CHECK-NEXT: kt_exec.call "cuda.rms_norm" on "cuda:0" ["x@cuda:0"] -> ["h"]
// ... the GPU's activations come down for the CPU experts (read twice, copied once) ...
// CHECK-NEXT: kt_exec.call "cuda.download" on "cuda:0" ["h"] -> ["h@cpu"]
// CHECK-NEXT: kt_exec.call "cpu.moe_experts" on "cpu" ["h@cpu", "h@cpu"] -> ["e"]
// CHECK-NEXT: kt_exec.call "cuda.upload" on "cuda:1" ["e"] -> ["e@cuda:1"]
// ... and the second reader of x on cuda:0 reuses the copy.
// CHECK-NEXT: kt_exec.call "cuda.silu_mul" on "cuda:0" ["h", "x@cuda:0"] -> ["s"]
// Between GPUs: a peer copy run by the receiving GPU.
// CHECK-NEXT: kt_exec.call "cuda.peer_copy" on "cuda:1" ["s"] -> ["s@cuda:1"]
// CHECK-NEXT: kt_exec.call "cuda.add" on "cuda:1" ["s@cuda:1", "e@cuda:1"] -> ["y"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:1" ["y"] -> ["logits"]
// CHECK-NEXT: kt_exec.call "cuda.download" on "cuda:1" ["logits"] -> ["logits@cpu"]

// Idempotent: nothing left to copy the second time.
// TWICE-COUNT-11: kt_exec.call
// TWICE-NOT: kt_exec.call
