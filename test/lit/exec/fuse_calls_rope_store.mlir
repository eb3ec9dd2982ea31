// kt-fuse-calls alone: q's cuda.rope right before the layer's
// cuda.mla_cache_store becomes one cuda.rope_mla_store [q, kv] -> [q roped]
// with the store's norm weight, cache and eps and the rope's parameters (the
// store's own rope parameters must be the rope's). A store whose rope
// differs, a store reading the roped rows, a call between, and the CPU's
// calls stay apart. A cuda.rope_mla_store right before the layer's
// cuda.mla_attention_absorbed of its roped rows (read by nothing else) joins it
// as cuda.mla_attention_store [q, kv] -> [o], weights the attention's then the
// norm, the params of both.
// RUN: kt-opt %s --kt-fuse-calls | FileCheck %s
// RUN: kt-opt %s --kt-fuse-calls --kt-fuse-calls | FileCheck %s

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 2 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.kv_cache "kv0" layer 0 "mla_latent" on "cuda:0" {k_cols = 64 : i64, n_kv_heads = 1 : i64, type = "F16", v_cols = 16 : i64}
  kt_exec.kv_cache "kv1" layer 1 "mla_latent" on "cpu" {k_cols = 64 : i64, n_kv_heads = 1 : i64, type = "F16", v_cols = 16 : i64}
  kt_exec.weight "n0" "blk.0.attn_kv_a_norm.weight" : "F32" [64] on "cuda:0" {bytes = 256 : i64, layout = "gguf"}
  kt_exec.weight "n1" "blk.1.attn_kv_a_norm.weight" : "F32" [64] on "cpu" {bytes = 256 : i64, layout = "gguf"}
  kt_exec.weight "kb" "blk.0.attn_k_b.weight" : "Q8_0" [32, 64, 4] on "cuda:0" {bytes = 8704 : i64, layout = "gguf"}
  kt_exec.weight "vb" "blk.0.attn_v_b.weight" : "Q8_0" [64, 32, 4] on "cuda:0" {bytes = 8704 : i64, layout = "gguf"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "q" on "cuda:0" : "F32" x 192 per "tokens"
    kt_exec.buffer "qr" on "cuda:0" : "F32" x 192 per "tokens"
    kt_exec.buffer "qr2" on "cuda:0" : "F32" x 192 per "tokens"
    kt_exec.buffer "qr3" on "cuda:0" : "F32" x 192 per "tokens"
    kt_exec.buffer "qr4" on "cuda:0" : "F32" x 80 per "tokens"
    kt_exec.buffer "qr5" on "cuda:0" : "F32" x 192 per "tokens"
    kt_exec.buffer "kv" on "cuda:0" : "F32" x 80 per "tokens"
    kt_exec.buffer "qc" on "cpu" : "F32" x 192 per "tokens"
    kt_exec.buffer "qcr" on "cpu" : "F32" x 192 per "tokens"
    kt_exec.buffer "kvc" on "cpu" : "F32" x 80 per "tokens"
    kt_exec.buffer "qa" on "cuda:0" : "F32" x 192 per "tokens"
    kt_exec.buffer "oa" on "cuda:0" : "F32" x 128 per "tokens"
    kt_exec.buffer "qb" on "cuda:0" : "F32" x 192 per "tokens"
    kt_exec.buffer "ob" on "cuda:0" : "F32" x 128 per "tokens"
    kt_exec.buffer "ob2" on "cuda:0" : "F32" x 192 per "tokens"
    kt_exec.buffer "logits" on "cpu" : "F32" x 64 per "outputs"
    kt_exec.call "cuda.rope" on "cuda:0" ["q"] -> ["qr"] weights [] params {freq_base = 1.000000e+04 : f64, head_dim = 48 : i64, mode = 0 : i64, n_dims = 16 : i64, n_heads = 4 : i64, offset = 32 : i64} layer 0 path "l0.rope"
    kt_exec.call "cuda.mla_cache_store" on "cuda:0" ["kv"] -> [] weights ["n0"] kv "kv0" params {eps = 1.0e-06 : f64, freq_base = 1.000000e+04 : f64, mode = 0 : i64, n_dims = 16 : i64} layer 0 path "l0.store"
    kt_exec.call "cuda.rope" on "cuda:0" ["q"] -> ["qr2"] weights [] params {freq_base = 5.000000e+04 : f64, head_dim = 48 : i64, mode = 0 : i64, n_dims = 16 : i64, n_heads = 4 : i64, offset = 32 : i64} layer 0 path "l0.rope.other_base"
    kt_exec.call "cuda.mla_cache_store" on "cuda:0" ["kv"] -> [] weights ["n0"] kv "kv0" params {eps = 1.0e-06 : f64, freq_base = 1.000000e+04 : f64, mode = 0 : i64, n_dims = 16 : i64} layer 0 path "l0.store.2"
    kt_exec.call "cuda.rope" on "cuda:0" ["q"] -> ["qr3"] weights [] params {freq_base = 1.000000e+04 : f64, head_dim = 48 : i64, mode = 0 : i64, n_dims = 16 : i64, n_heads = 4 : i64, offset = 32 : i64} layer 0 path "l0.rope.between"
    kt_exec.call "cuda.add" on "cuda:0" ["q", "q"] -> ["qr5"] weights [] params {} layer 0 path "l0.between"
    kt_exec.call "cuda.mla_cache_store" on "cuda:0" ["kv"] -> [] weights ["n0"] kv "kv0" params {eps = 1.0e-06 : f64, freq_base = 1.000000e+04 : f64, mode = 0 : i64, n_dims = 16 : i64} layer 0 path "l0.store.3"
    kt_exec.call "cuda.rope" on "cuda:0" ["kv"] -> ["qr4"] weights [] params {freq_base = 1.000000e+04 : f64, head_dim = 80 : i64, mode = 0 : i64, n_dims = 16 : i64, n_heads = 1 : i64, offset = 64 : i64} layer 0 path "l0.rope.self"
    kt_exec.call "cuda.mla_cache_store" on "cuda:0" ["qr4"] -> [] weights ["n0"] kv "kv0" params {eps = 1.0e-06 : f64, freq_base = 1.000000e+04 : f64, mode = 0 : i64, n_dims = 16 : i64} layer 0 path "l0.store.roped"
    kt_exec.call "cuda.rope" on "cuda:0" ["q"] -> ["qa"] weights [] params {freq_base = 1.000000e+04 : f64, head_dim = 48 : i64, mode = 0 : i64, n_dims = 16 : i64, n_heads = 4 : i64, offset = 32 : i64} layer 0 path "l0.rope.attn"
    kt_exec.call "cuda.mla_cache_store" on "cuda:0" ["kv"] -> [] weights ["n0"] kv "kv0" params {eps = 1.0e-06 : f64, freq_base = 1.000000e+04 : f64, mode = 0 : i64, n_dims = 16 : i64} layer 0 path "l0.store.attn"
    kt_exec.call "cuda.mla_attention_absorbed" on "cuda:0" ["qa"] -> ["oa"] weights ["kb", "vb"] kv "kv0" params {d_nope = 32 : i64, d_rope = 16 : i64, d_v = 32 : i64, kq_scale = 2.500000e-01 : f64, kv_lora_rank = 64 : i64, n_heads = 4 : i64} layer 0 path "l0.attn"
    kt_exec.call "cuda.rope" on "cuda:0" ["q"] -> ["qb"] weights [] params {freq_base = 1.000000e+04 : f64, head_dim = 48 : i64, mode = 0 : i64, n_dims = 16 : i64, n_heads = 4 : i64, offset = 32 : i64} layer 0 path "l0.rope.read_twice"
    kt_exec.call "cuda.mla_cache_store" on "cuda:0" ["kv"] -> [] weights ["n0"] kv "kv0" params {eps = 1.0e-06 : f64, freq_base = 1.000000e+04 : f64, mode = 0 : i64, n_dims = 16 : i64} layer 0 path "l0.store.read_twice"
    kt_exec.call "cuda.mla_attention_absorbed" on "cuda:0" ["qb"] -> ["ob"] weights ["kb", "vb"] kv "kv0" params {d_nope = 32 : i64, d_rope = 16 : i64, d_v = 32 : i64, kq_scale = 2.500000e-01 : f64, kv_lora_rank = 64 : i64, n_heads = 4 : i64} layer 0 path "l0.attn.read_twice"
    kt_exec.call "cuda.add" on "cuda:0" ["qb", "qb"] -> ["ob2"] weights [] params {} layer 0 path "l0.reads_qb"
    kt_exec.call "cpu.rope" on "cpu" ["qc"] -> ["qcr"] weights [] params {freq_base = 1.000000e+04 : f64, head_dim = 48 : i64, mode = 0 : i64, n_dims = 16 : i64, n_heads = 4 : i64, offset = 32 : i64} layer 1 path "l1.rope"
    kt_exec.call "cpu.mla_cache_store" on "cpu" ["kvc"] -> [] weights ["n1"] kv "kv1" params {eps = 1.0e-06 : f64, freq_base = 1.000000e+04 : f64, mode = 0 : i64, n_dims = 16 : i64} layer 1 path "l1.store"
  }
}

// The roped rows the attention alone read are gone; those another call reads stay.
// CHECK-NOT: kt_exec.buffer "qa"
// CHECK: kt_exec.buffer "qb"
// CHECK: kt_exec.call "cuda.rope_mla_store" on "cuda:0" ["q", "kv"] -> ["qr"] weights ["n0"] kv "kv0" params {eps = {{.*}} : f64, freq_base = 1.000000e+04 : f64, head_dim = 48 : i64, mode = 0 : i64, n_dims = 16 : i64, n_heads = 4 : i64, offset = 32 : i64} layer 0 path "l0.store"
// CHECK-NEXT: kt_exec.call "cuda.rope" on "cuda:0" ["q"] -> ["qr2"]
// CHECK-NEXT: kt_exec.call "cuda.mla_cache_store" on "cuda:0" ["kv"] -> []
// CHECK-NEXT: kt_exec.call "cuda.rope" on "cuda:0" ["q"] -> ["qr3"]
// CHECK-NEXT: kt_exec.call "cuda.add"
// CHECK-NEXT: kt_exec.call "cuda.mla_cache_store" on "cuda:0" ["kv"] -> []
// CHECK-NEXT: kt_exec.call "cuda.rope" on "cuda:0" ["kv"] -> ["qr4"]
// CHECK-NEXT: kt_exec.call "cuda.mla_cache_store" on "cuda:0" ["qr4"] -> []
// CHECK-NEXT: kt_exec.call "cuda.mla_attention_store" on "cuda:0" ["q", "kv"] -> ["oa"] weights ["kb", "vb", "n0"] kv "kv0" params {d_nope = 32 : i64, d_rope = 16 : i64, d_v = 32 : i64, eps = {{.*}} : f64, freq_base = 1.000000e+04 : f64, head_dim = 48 : i64, kq_scale = 2.500000e-01 : f64, kv_lora_rank = 64 : i64, mode = 0 : i64, n_dims = 16 : i64, n_heads = 4 : i64, offset = 32 : i64} layer 0 path "l0.attn"
// CHECK-NEXT: kt_exec.call "cuda.rope_mla_store" on "cuda:0" ["q", "kv"] -> ["qb"]
// CHECK-NEXT: kt_exec.call "cuda.mla_attention_absorbed" on "cuda:0" ["qb"] -> ["ob"]
// CHECK-NEXT: kt_exec.call "cuda.add"
// CHECK-NEXT: kt_exec.call "cpu.rope"
// CHECK-NEXT: kt_exec.call "cpu.mla_cache_store"
