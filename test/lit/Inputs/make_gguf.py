#!/usr/bin/env python3
"""Writes a small GGUF v3 model (F32 zeros) for importer tests, optionally
broken on purpose. Uses only the standard library (struct), so the tests do
not depend on the code under test to make their inputs.

  make_gguf.py OUT [--preset llama|deepseek2-split|qwen3moe] [--arch NAME]
               [--drop TENSOR] [--shape TENSOR=d0,d1,...] [--add TENSOR=d0,d1,...]
               [--drop-key KEY] [--set KEY=INT]
"""
import argparse
import struct

U32, F32, BOOL, STRING, U64 = 4, 6, 7, 8, 10


def llama():
    h, heads, kv, ff, vocab, layers = 32, 4, 2, 64, 64, 2
    hd = h // heads
    meta = {"llama.context_length": (U32, 256), "llama.embedding_length": (U32, h),
            "llama.block_count": (U32, layers), "llama.feed_forward_length": (U32, ff),
            "llama.attention.head_count": (U32, heads),
            "llama.attention.head_count_kv": (U32, kv),
            "llama.attention.layer_norm_rms_epsilon": (F32, 1e-5),
            "llama.rope.freq_base": (F32, 10000.0), "llama.vocab_size": (U32, vocab)}
    t = [("token_embd.weight", [h, vocab]), ("output_norm.weight", [h]),
         ("output.weight", [h, vocab])]
    for i in range(layers):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", [h]), (b + "attn_q.weight", [h, heads * hd]),
              (b + "attn_k.weight", [h, kv * hd]), (b + "attn_v.weight", [h, kv * hd]),
              (b + "attn_output.weight", [heads * hd, h]), (b + "ffn_norm.weight", [h]),
              (b + "ffn_gate.weight", [h, ff]), (b + "ffn_up.weight", [h, ff]),
              (b + "ffn_down.weight", [ff, h])]
    return "llama", meta, t


def deepseek2_split():
    """DeepSeek-V2-Lite-like, but with kv_b stored as per-head k_b / v_b, as
    newer llama.cpp writes it (key_length_mla / value_length_mla)."""
    h, heads, kv_lora, rope, nope, v, layers = 32, 2, 16, 8, 24, 16, 2
    ff, n_exp, exp_ff, vocab = 32, 4, 16, 64
    a = "deepseek2."
    meta = {a + "context_length": (U32, 4096), a + "embedding_length": (U32, h),
            a + "block_count": (U32, layers), a + "feed_forward_length": (U32, ff),
            a + "attention.head_count": (U32, heads), a + "attention.head_count_kv": (U32, 1),
            a + "attention.layer_norm_rms_epsilon": (F32, 1e-6),
            a + "attention.key_length": (U32, kv_lora + rope),
            a + "attention.value_length": (U32, kv_lora),
            a + "attention.key_length_mla": (U32, nope + rope),
            a + "attention.value_length_mla": (U32, v),
            a + "attention.kv_lora_rank": (U32, kv_lora), a + "rope.dimension_count": (U32, rope),
            a + "leading_dense_block_count": (U32, 1), a + "expert_count": (U32, n_exp),
            a + "expert_used_count": (U32, 2), a + "expert_feed_forward_length": (U32, exp_ff),
            a + "expert_shared_count": (U32, 1), a + "expert_gating_func": (U32, 1),
            a + "vocab_size": (U32, vocab)}
    t = [("token_embd.weight", [h, vocab]), ("output_norm.weight", [h]),
         ("output.weight", [h, vocab])]
    for i in range(layers):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", [h]), (b + "attn_q.weight", [h, heads * (nope + rope)]),
              (b + "attn_kv_a_mqa.weight", [h, kv_lora + rope]),
              (b + "attn_kv_a_norm.weight", [kv_lora]),
              (b + "attn_k_b.weight", [nope, kv_lora, heads]),
              (b + "attn_v_b.weight", [kv_lora, v, heads]),
              (b + "attn_output.weight", [heads * v, h]), (b + "ffn_norm.weight", [h])]
        if i == 0:
            t += [(b + "ffn_gate.weight", [h, ff]), (b + "ffn_up.weight", [h, ff]),
                  (b + "ffn_down.weight", [ff, h])]
        else:
            t += [(b + "ffn_gate_inp.weight", [h, n_exp]),
                  (b + "ffn_gate_exps.weight", [h, exp_ff, n_exp]),
                  (b + "ffn_up_exps.weight", [h, exp_ff, n_exp]),
                  (b + "ffn_down_exps.weight", [exp_ff, h, n_exp]),
                  (b + "ffn_gate_shexp.weight", [h, exp_ff]),
                  (b + "ffn_up_shexp.weight", [h, exp_ff]),
                  (b + "ffn_down_shexp.weight", [exp_ff, h])]
    return "deepseek2", meta, t


def qwen3moe():
    """Qwen3-MoE-like: head_dim (16) wider than hidden / heads (8), per-head
    q/k RMSNorm, no shared expert."""
    h, heads, kv, hd, layers, n_exp, exp_ff, vocab = 32, 4, 2, 16, 2, 4, 8, 64
    a = "qwen3moe."
    meta = {a + "context_length": (U32, 4096), a + "embedding_length": (U32, h),
            a + "block_count": (U32, layers), a + "feed_forward_length": (U32, 64),
            a + "attention.head_count": (U32, heads), a + "attention.head_count_kv": (U32, kv),
            a + "attention.key_length": (U32, hd), a + "attention.value_length": (U32, hd),
            a + "attention.layer_norm_rms_epsilon": (F32, 1e-6),
            a + "rope.freq_base": (F32, 1000000.0), a + "expert_count": (U32, n_exp),
            a + "expert_used_count": (U32, 2), a + "expert_feed_forward_length": (U32, exp_ff)}
    t = [("token_embd.weight", [h, vocab]), ("output_norm.weight", [h]),
         ("output.weight", [h, vocab])]
    for i in range(layers):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", [h]), (b + "attn_q.weight", [h, heads * hd]),
              (b + "attn_k.weight", [h, kv * hd]), (b + "attn_v.weight", [h, kv * hd]),
              (b + "attn_output.weight", [heads * hd, h]), (b + "attn_q_norm.weight", [hd]),
              (b + "attn_k_norm.weight", [hd]), (b + "ffn_norm.weight", [h]),
              (b + "ffn_gate_inp.weight", [h, n_exp]),
              (b + "ffn_gate_exps.weight", [h, exp_ff, n_exp]),
              (b + "ffn_up_exps.weight", [h, exp_ff, n_exp]),
              (b + "ffn_down_exps.weight", [exp_ff, h, n_exp])]
    return "qwen3moe", meta, t


PRESETS = {"llama": llama, "deepseek2-split": deepseek2_split, "qwen3moe": qwen3moe}


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind, value):
    if kind == U32:
        return struct.pack("<I", value)
    if kind == F32:
        return struct.pack("<f", value)
    if kind == BOOL:
        return struct.pack("<?", value)
    if kind == STRING:
        return gguf_string(value)
    raise ValueError(kind)


def write(path, arch, meta, tensors, align=32):
    kvs = [("general.architecture", STRING, arch), ("general.name", STRING, "crafted")]
    kvs += [(k, kind, v) for k, (kind, v) in meta.items()]
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for key, kind, value in kvs:
        out += gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, value)
    offset, sizes = 0, []
    for name, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        sizes.append(n * 4)
        out += gguf_string(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", 0, offset)  # F32, offset in the data section
        offset += (n * 4 + align - 1) // align * align
    out += bytes(-len(out) % align)
    for size in sizes:
        out += bytes(size) + bytes(-size % align)
    with open(path, "wb") as f:
        f.write(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--preset", default="llama", choices=sorted(PRESETS))
    p.add_argument("--arch")
    p.add_argument("--drop", action="append", default=[])
    p.add_argument("--shape", action="append", default=[])
    p.add_argument("--add", action="append", default=[])
    p.add_argument("--drop-key", action="append", default=[])
    p.add_argument("--set", action="append", default=[])
    args = p.parse_args()
    arch, meta, tensors = PRESETS[args.preset]()
    names = [n for n, _ in tensors]
    for name in args.drop:
        assert name in names, name
    tensors = [(n, s) for n, s in tensors if n not in args.drop]
    for spec in args.shape:
        name, dims = spec.split("=")
        assert name in names, name
        tensors = [(n, [int(d) for d in dims.split(",")] if n == name else s) for n, s in tensors]
    for spec in args.add:
        name, dims = spec.split("=")
        assert name not in names, name
        tensors.append((name, [int(d) for d in dims.split(",")]))
    for key in args.drop_key:
        del meta[key]
    for spec in args.set:
        key, value = spec.split("=")
        meta[key] = (U32, int(value))
    write(args.out, args.arch or arch, meta, tensors)


if __name__ == "__main__":
    main()
