// kt-fuse-calls alone, the activations' 8-bit rounding moved into the norm
// that writes them: a cuda.add_rms_norm whose output the GPU's int8 products
// read gets a third output, its rows rounded to the blocks most of those
// products take (round_act 256 for K-quants and IQ4_XS, 32 for Q8_0 / Q4_0 /
// Q5_0), and those products read it as a second input (routed experts on the
// GPU, as a fourth, after x, ids and weights). Products of other
// blocks, float weights, the CPU's calls, and a norm no int8 product reads
// stay as they are, as do experts streamed from the host.
// RUN: kt-opt %s --kt-fuse-calls | FileCheck %s
// RUN: kt-opt %s --kt-fuse-calls --kt-fuse-calls | FileCheck %s

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 2 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.weight "wn" "blk.1.attn_norm.weight" : "F32" [512] on "cuda:0" {bytes = 2048 : i64, layout = "gguf"}
  kt_exec.weight "wq" "blk.1.attn_q.weight" : "Q4_K" [512, 64] on "cuda:0" {bytes = 18432 : i64, layout = "gguf"}
  kt_exec.weight "wkv" "blk.1.attn_kv_a_mqa.weight" : "Q6_K" [512, 32] on "cuda:0" {bytes = 13440 : i64, layout = "gguf"}
  kt_exec.weight "wo" "blk.1.other.weight" : "Q8_0" [512, 64] on "cuda:0" {bytes = 34816 : i64, layout = "gguf"}
  kt_exec.weight "wf" "blk.1.float.weight" : "F16" [512, 64] on "cuda:0" {bytes = 65536 : i64, layout = "gguf"}
  kt_exec.weight "wg" "blk.1.ffn_gate_shexp.weight" : "Q4_K" [512, 64] on "cuda:0" {bytes = 18432 : i64, layout = "gguf"}
  kt_exec.weight "wu" "blk.1.ffn_up_shexp.weight" : "Q4_K" [512, 64] on "cuda:0" {bytes = 18432 : i64, layout = "gguf"}
  kt_exec.weight "wn2" "blk.1.ffn_norm.weight" : "F32" [512] on "cuda:0" {bytes = 2048 : i64, layout = "gguf"}
  kt_exec.weight "w8" "blk.1.ffn_down.weight" : "Q5_0" [512, 64] on "cuda:0" {bytes = 22528 : i64, layout = "gguf"}
  kt_exec.weight "wn3" "output_norm.weight" : "F32" [512] on "cuda:0" {bytes = 2048 : i64, layout = "gguf"}
  kt_exec.weight "wge" "blk.1.ffn_gate_exps.weight" : "Q4_K" [512, 64, 4] on "cuda:0" {bytes = 73728 : i64, layout = "gguf"}
  kt_exec.weight "wue" "blk.1.ffn_up_exps.weight" : "Q4_K" [512, 64, 4] on "cuda:0" {bytes = 73728 : i64, layout = "gguf"}
  kt_exec.weight "wde" "blk.1.ffn_down_exps.weight" : "Q8_0" [64, 512, 4] on "cuda:0" {bytes = 139264 : i64, layout = "gguf"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "x" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "r" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "y" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "h" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "q" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "kv" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "o" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "f" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "gl" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "ids" on "cuda:0" : "I32" x 2 per "tokens"
    kt_exec.buffer "ew" on "cuda:0" : "F32" x 2 per "tokens"
    kt_exec.buffer "ex" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "es" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "y2" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "h2" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "d" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "y3" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "h3" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "logits" on "cpu" : "F32" x 64 per "outputs"
    kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["x", "r"] -> ["y", "h"] weights ["wn"] params {eps = 1.0e-06 : f64} layer 1 path "l1.attn_norm"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["q"] weights ["wq"] params {} layer 1 path "l1.q"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["kv"] weights ["wkv"] params {} layer 1 path "l1.kv_a"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["o"] weights ["wo"] params {} layer 1 path "l1.q8_0"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["f"] weights ["wf"] params {} layer 1 path "l1.f16"
    kt_exec.call "cuda.matmul_glu" on "cuda:0" ["h"] -> ["gl"] weights ["wg", "wu"] params {} layer 1 path "l1.shexp"
    kt_exec.call "cuda.moe_experts" on "cuda:0" ["h", "ids", "ew"] -> ["ex"] weights ["wge", "wue", "wde"] params {} layer 1 path "l1.experts"
    kt_exec.call "cuda.moe_experts" on "cuda:0" ["h", "ids", "ew"] -> ["es"] weights ["wge", "wue", "wde"] params {streamed = 1 : i64} layer 1 path "l1.streamed"
    kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["y", "q"] -> ["y2", "h2"] weights ["wn2"] params {eps = 1.0e-06 : f64} layer 1 path "l1.ffn_norm"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h2"] -> ["d"] weights ["w8"] params {} layer 1 path "l1.down"
    kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["y2", "h2"] -> ["y3", "h3"] weights ["wn3"] params {eps = 1.0e-06 : f64} layer -1 path "output_norm"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h3"] -> ["logits"] weights ["wf"] params {} layer -1 path "lm_head"
  }
}

// CHECK: kt_exec.buffer "h" on "cuda:0" : "F32" x 512
// CHECK-NEXT: kt_exec.buffer "h.q8" on "cuda:0" : "I32" x 130 per "tokens"
// CHECK: kt_exec.buffer "h2" on "cuda:0" : "F32" x 512
// CHECK-NEXT: kt_exec.buffer "h2.q8" on "cuda:0" : "I32" x 144 per "tokens"
// CHECK-NOT: kt_exec.buffer "h3.q8"
// Most readers take Q8_K blocks (Q4_K, Q6_K, the GLU's Q4_K): 512 / 4 + 512 / 256 words a row.
// CHECK: kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["x", "r"] -> ["y", "h", "h.q8"] weights ["wn"] params {eps = {{.*}} : f64, round_act = 256 : i64}
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h", "h.q8"] -> ["q"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h", "h.q8"] -> ["kv"]
// Q8_0 rounds to blocks of 32: it rounds for itself; F16 takes floats.
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["o"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["f"]
// CHECK-NEXT: kt_exec.call "cuda.matmul_glu" on "cuda:0" ["h", "h.q8"] -> ["gl"]
// CHECK-NEXT: kt_exec.call "cuda.moe_experts" on "cuda:0" ["h", "ids", "ew", "h.q8"] -> ["ex"]
// CHECK-NEXT: kt_exec.call "cuda.moe_experts" on "cuda:0" ["h", "ids", "ew"] -> ["es"]
// A norm read by a Q5_0 product: blocks of 32 (512 / 4 + 512 / 32 words); the
// norm's own sum (input h2 of the next norm) is not a product.
// CHECK-NEXT: kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["y", "q"] -> ["y2", "h2", "h2.q8"] weights ["wn2"] params {eps = {{.*}} : f64, round_act = 32 : i64}
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h2", "h2.q8"] -> ["d"]
// Only a float product reads the last norm: no rounded output.
// CHECK-NEXT: kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["y2", "h2"] -> ["y3", "h3"] weights ["wn3"] params {eps = {{.*}} : f64} layer -1
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h3"] -> ["logits"]
