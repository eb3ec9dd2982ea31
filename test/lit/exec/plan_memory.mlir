// kt-plan-memory alone: buffers whose lifetimes do not overlap share bytes,
// each arena is its largest phase's, devices get their weight and KV bytes.
// RUN: kt-opt %s --kt-plan-memory | FileCheck %s

// 4 buffers of 64 F32 x 8 rows = 2048 bytes each; I32 x 2 = 64 bytes (aligned).
// CHECK-LABEL: kt_exec.plan
// CHECK: kt_exec.device "cpu" {arena_bytes = 6144 : i64, {{.*}}kv_bytes_per_token = 72 : i64, weight_bytes = 1000 : i64}
// a: written by call 0, read by call 1.
// CHECK: kt_exec.buffer "a" on "cpu" : "F32" x 64 per "tokens" at 0
// b: live with a at call 1.
// CHECK: kt_exec.buffer "b" on "cpu" : "F32" x 64 per "tokens" at 2048
// c: written at call 2, after a died: takes a's place.
// CHECK: kt_exec.buffer "c" on "cpu" : "F32" x 64 per "tokens" at 0
// logits: live to the end; b and c are live at call 3, so it goes above them.
// CHECK: kt_exec.buffer "logits" on "cpu" : "F32" x 64 per "outputs" at 4096
// CHECK: kt_exec.buffer "ids" on "cpu" : "I32" x 2 per "tokens" at 0
kt_exec.plan "llama" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 1 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.weight "w0" "t0" : "F32" [10, 25] on "cpu" {bytes = 1000 : i64, layout = "gguf"}
  kt_exec.kv_cache "kv0" layer 0 "kv" on "cpu" {k_cols = 16 : i64, n_kv_heads = 1 : i64, type = "F16", v_cols = 20 : i64}
  kt_exec.phase "prefill" max_tokens 8 logits "logits" {
    kt_exec.buffer "a" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "b" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "c" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "logits" on "cpu" : "F32" x 64 per "outputs"
    kt_exec.call "cpu.embed" on "cpu" [] -> ["a"] weights ["w0"] params {} layer -1 path "e"
    kt_exec.call "cpu.rms_norm" on "cpu" ["a"] -> ["b"] weights [] params {} layer 0 path "n"
    kt_exec.call "cpu.add" on "cpu" ["b", "b"] -> ["c"] weights [] params {} layer 0 path "x"
    kt_exec.call "cpu.add" on "cpu" ["b", "c"] -> ["logits"] weights [] params {} layer 0 path "y"
  }
  // A smaller phase: its buffers start again at 0 in the same arena.
  kt_exec.phase "decode" max_tokens 4 logits "ids" {
    kt_exec.buffer "ids" on "cpu" : "I32" x 2 per "tokens"
    kt_exec.call "cpu.embed" on "cpu" [] -> ["ids"] weights ["w0"] params {} layer -1 path "e"
  }
}
