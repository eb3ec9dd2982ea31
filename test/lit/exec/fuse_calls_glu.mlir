// kt-fuse-calls alone, the GPU's gate/up/SwiGLU triple: two cuda.matmul calls
// over one input followed by cuda.silu_mul of their products become one
// cuda.matmul_glu with the gate's weight first (whichever product came first),
// and the products' buffers go. A product read elsewhere, a bias, other
// inputs, and the CPU's calls stay as they are.
// RUN: kt-opt %s --kt-fuse-calls | FileCheck %s
// RUN: kt-opt %s --kt-fuse-calls --kt-fuse-calls | FileCheck %s --check-prefix=TWICE

kt_exec.plan "deepseek2" gguf "m.gguf" attributes {chat_template = "", gguf_fingerprint = "0", gguf_size = 0 : i64, hparams = {}, n_ctx = 16 : i64, n_layer = 2 : i64, n_vocab = 64 : i64, options = {}} {
  kt_exec.device "cpu" {index = 0 : i64, kind = "cpu"}
  kt_exec.device "cuda:0" {index = 0 : i64, kind = "cuda"}
  kt_exec.phase "decode" max_tokens 4 logits "logits" {
    kt_exec.buffer "x" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "g1" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "u1" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "h1" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "g2" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "u2" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "h2" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "g3" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "u3" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "h3" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "y3" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "g4" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "u4" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "h4" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "z" on "cuda:0" : "F32" x 64 per "tokens"
    kt_exec.buffer "g5" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "u5" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "h5" on "cuda:0" : "F32" x 96 per "tokens"
    kt_exec.buffer "xc" on "cpu" : "F32" x 64 per "tokens"
    kt_exec.buffer "g6" on "cpu" : "F32" x 96 per "tokens"
    kt_exec.buffer "u6" on "cpu" : "F32" x 96 per "tokens"
    kt_exec.buffer "h6" on "cpu" : "F32" x 96 per "tokens"
    kt_exec.buffer "logits" on "cpu" : "F32" x 64 per "outputs"
    kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["g1"] weights ["blk.0.ffn_gate.weight"] params {} layer 0 path "l0.ffn.gate"
    kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["u1"] weights ["blk.0.ffn_up.weight"] params {} layer 0 path "l0.ffn.up"
    kt_exec.call "cuda.silu_mul" on "cuda:0" ["g1", "u1"] -> ["h1"] weights [] params {} layer 0 path "l0.ffn.silu_mul"
    kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["u2"] weights ["blk.1.ffn_up_shexp.weight"] params {} layer 1 path "l1.shexp.up"
    kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["g2"] weights ["blk.1.ffn_gate_shexp.weight"] params {} layer 1 path "l1.shexp.gate"
    kt_exec.call "cuda.silu_mul" on "cuda:0" ["g2", "u2"] -> ["h2"] weights [] params {} layer 1 path "l1.shexp.silu_mul"
    kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["g3"] weights ["wg3"] params {} layer 1 path "l1.g3"
    kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["u3"] weights ["wu3"] params {} layer 1 path "l1.u3"
    kt_exec.call "cuda.silu_mul" on "cuda:0" ["g3", "u3"] -> ["h3"] weights [] params {} layer 1 path "l1.s3"
    kt_exec.call "cuda.add" on "cuda:0" ["g3", "h3"] -> ["y3"] weights [] params {} layer 1 path "l1.reads_g3"
    kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["g4"] weights ["wg4", "bias4"] params {} layer 1 path "l1.g4"
    kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["u4"] weights ["wu4"] params {} layer 1 path "l1.u4"
    kt_exec.call "cuda.silu_mul" on "cuda:0" ["g4", "u4"] -> ["h4"] weights [] params {} layer 1 path "l1.s4"
    kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["g5"] weights ["wg5"] params {} layer 1 path "l1.g5"
    kt_exec.call "cuda.matmul" on "cuda:0" ["z"] -> ["u5"] weights ["wu5"] params {} layer 1 path "l1.u5"
    kt_exec.call "cuda.silu_mul" on "cuda:0" ["g5", "u5"] -> ["h5"] weights [] params {} layer 1 path "l1.s5"
    kt_exec.call "cpu.matmul" on "cpu" ["xc"] -> ["g6"] weights ["wg6"] params {} layer 1 path "l1.g6"
    kt_exec.call "cpu.matmul" on "cpu" ["xc"] -> ["u6"] weights ["wu6"] params {} layer 1 path "l1.u6"
    kt_exec.call "cpu.silu_mul" on "cpu" ["g6", "u6"] -> ["h6"] weights [] params {} layer 1 path "l1.s6"
    kt_exec.call "cpu.matmul" on "cpu" ["h6"] -> ["logits"] weights [] params {} layer -1 path "lm_head"
  }
}

// The fused calls' products are gone from the buffers; the others stay.
// CHECK-NOT: kt_exec.buffer "g1"
// CHECK-NOT: kt_exec.buffer "u1"
// CHECK-NOT: kt_exec.buffer "u2"
// CHECK-NOT: kt_exec.buffer "g2"
// CHECK: kt_exec.buffer "g3"
// The triple becomes one call with the gate's layer and path.
// CHECK: kt_exec.call "cuda.matmul_glu" on "cuda:0" ["x"] -> ["h1"] weights ["blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"] params {} layer 0 path "l0.ffn.gate"
// Up first: the gate (silu_mul's first input) still leads the weights.
// CHECK-NEXT: kt_exec.call "cuda.matmul_glu" on "cuda:0" ["x"] -> ["h2"] weights ["blk.1.ffn_gate_shexp.weight", "blk.1.ffn_up_shexp.weight"] params {} layer 1 path "l1.shexp.gate"
// A gate product read by another call stays.
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["g3"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["u3"]
// CHECK-NEXT: kt_exec.call "cuda.silu_mul"
// CHECK-NEXT: kt_exec.call "cuda.add"
// A bias stays (matmul_glu takes none).
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["g4"] weights ["wg4", "bias4"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["u4"]
// CHECK-NEXT: kt_exec.call "cuda.silu_mul"
// Products of two inputs stay.
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["x"] -> ["g5"]
// CHECK-NEXT: kt_exec.call "cuda.matmul" on "cuda:0" ["z"] -> ["u5"]
// CHECK-NEXT: kt_exec.call "cuda.silu_mul"
// The CPU's triple stays.
// CHECK-NEXT: kt_exec.call "cpu.matmul" on "cpu" ["xc"] -> ["g6"]
// CHECK-NEXT: kt_exec.call "cpu.matmul" on "cpu" ["xc"] -> ["u6"]
// CHECK-NEXT: kt_exec.call "cpu.silu_mul"
// CHECK-NEXT: kt_exec.call "cpu.matmul"

// Idempotent.
// TWICE-COUNT-16: kt_exec.call
// TWICE-NOT: kt_exec.call
