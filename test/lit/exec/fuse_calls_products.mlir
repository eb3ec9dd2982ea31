// kt-fuse-calls alone, products of one input: 2 to 4 cuda.matmul calls with
// the same inputs over quantized weights of one type, all biased or none,
// become one cuda.matmul_multi where the first was (outputs in order, weights
// then biases). A later product joins over calls that neither write its inputs
// nor touch its output (V3's kv_a after q_a's norm and q_b), on one device.
// An MLA layer's q and kv_a keep reading the norm's rounded rows; a GQA
// layer's q of another type stays alone while its k and v join; a call that
// rewrites the input, a CPU call between, float weights, a bias on one only,
// and a fifth product (past four) keep the products apart.
// RUN: kt-opt %s --kt-fuse-calls | FileCheck %s
// RUN: kt-opt %s --kt-fuse-calls --kt-fuse-calls | FileCheck %s

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 2 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.weight "wn" "blk.1.attn_norm.weight" : "F32" [512] on "cuda:0" {bytes = 2048 : i64, layout = "gguf"}
  kt_exec.weight "wq" "blk.1.attn_q.weight" : "Q4_K" [512, 64] on "cuda:0" {bytes = 18432 : i64, layout = "gguf"}
  kt_exec.weight "wkv" "blk.1.attn_kv_a_mqa.weight" : "Q4_K" [512, 32] on "cuda:0" {bytes = 9216 : i64, layout = "gguf"}
  kt_exec.weight "wqa" "blk.1.attn_q_a.weight" : "Q4_K" [512, 32] on "cuda:0" {bytes = 9216 : i64, layout = "gguf"}
  kt_exec.weight "wqan" "blk.1.attn_q_a_norm.weight" : "F32" [32] on "cuda:0" {bytes = 128 : i64, layout = "gguf"}
  kt_exec.weight "wqb" "blk.1.attn_q_b.weight" : "Q8_0" [32, 64] on "cuda:0" {bytes = 2176 : i64, layout = "gguf"}
  kt_exec.weight "gq" "blk.1.attn_q.weight" : "Q6_K" [512, 64] on "cuda:0" {bytes = 26880 : i64, layout = "gguf"}
  kt_exec.weight "gk" "blk.1.attn_k.weight" : "Q8_0" [512, 16] on "cuda:0" {bytes = 8704 : i64, layout = "gguf"}
  kt_exec.weight "gv" "blk.1.attn_v.weight" : "Q8_0" [512, 16] on "cuda:0" {bytes = 8704 : i64, layout = "gguf"}
  kt_exec.weight "bq" "blk.1.attn_q.bias" : "F32" [64] on "cuda:0" {bytes = 256 : i64, layout = "gguf"}
  kt_exec.weight "bk" "blk.1.attn_k.bias" : "F32" [16] on "cuda:0" {bytes = 64 : i64, layout = "gguf"}
  kt_exec.weight "bv" "blk.1.attn_v.bias" : "F32" [16] on "cuda:0" {bytes = 64 : i64, layout = "gguf"}
  kt_exec.weight "f1" "blk.1.f1.weight" : "F16" [512, 16] on "cuda:0" {bytes = 16384 : i64, layout = "gguf"}
  kt_exec.weight "f2" "blk.1.f2.weight" : "F16" [512, 16] on "cuda:0" {bytes = 16384 : i64, layout = "gguf"}
  kt_exec.weight "c1" "blk.1.c1.weight" : "Q8_0" [512, 16] on "cpu" {bytes = 8704 : i64, layout = "gguf"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "x" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "r" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "y" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "h" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "h2" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "z" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "u" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "v" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "w" on "cuda:0" : "F32" x 512 per "tokens"
    kt_exec.buffer "xc" on "cpu" : "F32" x 512 per "tokens"
    kt_exec.buffer "q" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "kv" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "qa" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "qan" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "qb" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "kva" on "cuda:0" : "F32" x 32 per "tokens"
    kt_exec.buffer "gqo" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "gko" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "gvo" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "u1" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "u2" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "u3" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "v1" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "v2" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "c1o" on "cpu" : "F32" x 16 per "tokens"
    kt_exec.buffer "p1" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "p2" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "p3" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "p4" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "p5" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "f1o" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "f2o" on "cuda:0" : "F32" x 16 per "tokens"
    kt_exec.buffer "logits" on "cpu" : "F32" x 64 per "outputs"
    kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["x", "r"] -> ["y", "h"] weights ["wn"] params {eps = 1.0e-06 : f64} layer 1 path "l1.attn_norm"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["q"] weights ["wq"] params {} layer 1 path "l1.q"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h"] -> ["kv"] weights ["wkv"] params {} layer 1 path "l1.kv_a"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h2"] -> ["qa"] weights ["wqa"] params {} layer 1 path "v3.q_a"
    kt_exec.call "cuda.rms_norm" on "cuda:0" ["qa"] -> ["qan"] weights ["wqan"] params {eps = 1.0e-06 : f64} layer 1 path "v3.q_a_norm"
    kt_exec.call "cuda.matmul" on "cuda:0" ["qan"] -> ["qb"] weights ["wqb"] params {} layer 1 path "v3.q_b"
    kt_exec.call "cuda.matmul" on "cuda:0" ["h2"] -> ["kva"] weights ["wkv"] params {} layer 1 path "v3.kv_a"
    kt_exec.call "cuda.matmul" on "cuda:0" ["z"] -> ["gqo"] weights ["gq", "bq"] params {} layer 1 path "gqa.q"
    kt_exec.call "cuda.matmul" on "cuda:0" ["z"] -> ["gko"] weights ["gk", "bk"] params {} layer 1 path "gqa.k"
    kt_exec.call "cuda.matmul" on "cuda:0" ["z"] -> ["gvo"] weights ["gv", "bv"] params {} layer 1 path "gqa.v"
    kt_exec.call "cuda.matmul" on "cuda:0" ["u"] -> ["u1"] weights ["gk"] params {} layer 1 path "u.before_rewrite"
    kt_exec.call "cuda.add" on "cuda:0" ["x", "r"] -> ["u"] weights [] params {} layer 1 path "u.rewrite"
    kt_exec.call "cuda.matmul" on "cuda:0" ["u"] -> ["u2"] weights ["gk"] params {} layer 1 path "u.after_rewrite"
    kt_exec.call "cuda.matmul" on "cuda:0" ["u"] -> ["u3"] weights ["gv", "bv"] params {} layer 1 path "u.biased"
    kt_exec.call "cuda.matmul" on "cuda:0" ["v"] -> ["v1"] weights ["gk"] params {} layer 1 path "v.before_cpu"
    kt_exec.call "cpu.matmul" on "cpu" ["xc"] -> ["c1o"] weights ["c1"] params {} layer 1 path "v.cpu"
    kt_exec.call "cuda.matmul" on "cuda:0" ["v"] -> ["v2"] weights ["gk"] params {} layer 1 path "v.after_cpu"
    kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["p1"] weights ["gk"] params {} layer 1 path "run5.a"
    kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["p2"] weights ["gv"] params {} layer 1 path "run5.b"
    kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["p3"] weights ["gk"] params {} layer 1 path "run5.c"
    kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["p4"] weights ["gv"] params {} layer 1 path "run5.d"
    kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["p5"] weights ["gk"] params {} layer 1 path "run5.e"
    kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["f1o"] weights ["f1"] params {} layer 1 path "f16.a"
    kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["f2o"] weights ["f2"] params {} layer 1 path "f16.b"
  }
}

// CHECK: kt_exec.call "cuda.add_rms_norm" on "cuda:0" ["x", "r"] -> ["y", "h", "h.q8"]
// CHECK-NEXT: kt_exec.call "cuda.matmul_multi" on "cuda:0" ["h", "h.q8"] -> ["q", "kv"] weights ["wq", "wkv"] params {} layer 1 path "l1.q"
// CHECK-NEXT: kt_exec.call "cuda.matmul_multi" on "cuda:0" ["h2"] -> ["qa", "kva"] weights ["wqa", "wkv"] params {} layer 1 path "v3.q_a"
// CHECK-NEXT: kt_exec.call "cuda.rms_norm" on "cuda:0" ["qa"] -> ["qan"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["qan"] -> ["qb"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["z"] -> ["gqo"] weights ["gq", "bq"]
// CHECK-NEXT: kt_exec.call "cuda.matmul_multi" on "cuda:0" ["z"] -> ["gko", "gvo"] weights ["gk", "gv", "bk", "bv"] params {} layer 1 path "gqa.k"
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["u"] -> ["u1"]
// CHECK-NEXT: kt_exec.call "cuda.add" on "cuda:0" ["x", "r"] -> ["u"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["u"] -> ["u2"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["u"] -> ["u3"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["v"] -> ["v1"]
// CHECK-NEXT: kt_exec.call "cpu.matmul" on "cpu" ["xc"] -> ["c1o"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["v"] -> ["v2"]
// CHECK-NEXT: kt_exec.call "cuda.matmul_multi" on "cuda:0" ["w"] -> ["p1", "p2", "p3", "p4"] weights ["gk", "gv", "gk", "gv"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["p5"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["f1o"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["w"] -> ["f2o"]
