// kt-fuse-calls alone, products of one input: plain cuda.matmul calls reading
// the same rows with weights of one int8 type become one cuda.matmuls call
// (up to 4 products) where the first was; later ones move up past calls they do
// not depend on. Products of other types form their own group; a product with
// a bias, float weights, the CPU's products and the logits' product stay alone.
// RUN: kt-opt %s --kt-fuse-calls | FileCheck %s
// RUN: kt-opt %s --kt-fuse-calls --kt-fuse-calls | FileCheck %s

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 2 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.weight "wq" "blk.1.attn_q.weight" : "Q4_K" [512, 64] on "cuda:0" {bytes = 18432 : i64, layout = "gguf"}
  kt_exec.weight "wkv" "blk.1.attn_kv_a_mqa.weight" : "Q4_K" [512, 32] on "cuda:0" {bytes = 9216 : i64, layout = "gguf"}
  kt_exec.weight "w3" "blk.1.a3.weight" : "Q4_K" [512, 32] on "cuda:0" {bytes = 9216 : i64, layout = "gguf"}
  kt_exec.weight "w4" "blk.1.a4.weight" : "Q4_K" [512, 32] on "cuda:0" {bytes = 9216 : i64, layout = "gguf"}
  kt_exec.weight "w5" "blk.1.a5.weight" : "Q4_K" [512, 32] on "cuda:0" {bytes = 9216 : i64, layout = "gguf"}
  kt_exec.weight "w6a" "blk.1.b6.weight" : "Q6_K" [512, 32] on "cuda:0" {bytes = 13440 : i64, layout = "gguf"}
  kt_exec.weight "w6b" "blk.1.c6.weight" : "Q6_K" [512, 32] on "cuda:0" {bytes = 13440 : i64, layout = "gguf"}
  kt_exec.weight "wb" "blk.1.bias.weight" : "F32" [32] on "cuda:0" {bytes = 128 : i64, layout = "gguf"}
  kt_exec.weight "wf" "blk.1.float.weight" : "F16" [512, 64] on "cuda:0" {bytes = 65536 : i64, layout = "gguf"}
  kt_exec.weight "wc" "blk.1.cpu.weight" : "Q4_K" [512, 32] on "cpu" {bytes = 9216 : i64, layout = "gguf"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "h" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "q" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "qn" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "kv" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "a3" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "a4" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "a5" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "b6" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "c6" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "bb" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "f1" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "f2" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "hc" on "cpu" : "F32" x 512 per "tokens"
    kt_exec.buffer "c1" on "cpu" : "F32" x 32 per "tokens"
    kt_exec.buffer "c2" on "cpu" : "F32" x 32 per "tokens"
    kt_exec.buffer "logits" on "cuda:0" : "F32" x 32 per "outputs"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["q"] weights ["wq"] params {} layer 1 path "l1.q"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["q"] -> ["qn"] weights [] params {eps = 1.0e-06 : f64} layer 1 path "l1.q_norm"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["kv"] weights ["wkv"] params {} layer 1 path "l1.kv_a"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["b6"] weights ["w6a"] params {} layer 1 path "l1.b6"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["bb"] weights ["wkv", "wb"] params {} layer 1 path "l1.biased"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["c6"] weights ["w6b"] params {} layer 1 path "l1.c6"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["f1"] weights ["wf"] params {} layer 1 path "l1.f1"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["f2"] weights ["wf"] params {} layer 1 path "l1.f2"
    kt_exec.call "cpu.matmul" on "cpu" ["hc"] -> ["c1"] weights ["wc"] params {} layer 1 path "l1.c1"
    kt_exec.call "cpu.matmul" on "cpu" ["hc"] -> ["c2"] weights ["wc"] params {} layer 1 path "l1.c2"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["a3"] weights ["w3"] params {} layer 1 path "l1.a3"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["a4"] weights ["w4"] params {} layer 1 path "l1.a4"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["a5"] weights ["w5"] params {} layer 1 path "l1.a5"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["logits"] weights ["wkv"] params {} layer -1 path "lm_head"
  }
}

// The first four Q4_K products of h, where the first was (with its layer and path).
// CHECK: kt_exec.call "cuda.matmuls" on "cuda:0" ["h"] -> ["q", "kv", "a3", "a4"] weights ["wq", "wkv", "w3", "w4"] params {} layer 1 path "l1.q"
// CHECK-NEXT: kt_exec.call "cuda.rms_norm" on "cuda:0" ["q"] -> ["qn"]
// The Q6_K pair is its own group.
// CHECK-NEXT: kt_exec.call "cuda.matmuls" on "cuda:0" ["h"] -> ["b6", "c6"] weights ["w6a", "w6b"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["bb"] weights ["wkv", "wb"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["f1"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["f2"]
// CHECK-NEXT: kt_exec.call "cpu.matmul" on "cpu" ["hc"] -> ["c1"]
// CHECK-NEXT: kt_exec.call "cpu.matmul" on "cpu" ["hc"] -> ["c2"]
// The fifth is left alone, as is the logits' product.
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["a5"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["logits"]
// CHECK-NOT: kt_exec.call
