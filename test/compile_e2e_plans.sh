#!/usr/bin/env bash
# The e2e_plans ctest fixture: compiles a CPU-only plan for every reference
# model found (../shared/models, else test/data's copies), deepseek2 ones
# with MLA absorbed and decompressed, into OUT/<model>-<form>.ktp, and for the
# MoE models OUT/<model>-defer1.ktp (--defer-experts 1) and OUT/<model>-split.ktp
# (--split-experts-test: the hot-expert split on the CPU), and for the quantized
# MoE models OUT/<model>-bf16.ktp (rules/cpu-only-amx-bf16.yaml),
# OUT/<model>-int8.ktp (rules/cpu-only-amx-int8.yaml) and OUT/<model>-int4.ktp
# (rules/cpu-only-amx-int4.yaml).
# The KV cache is F32, as llama.cpp's non-absorbed MLA graph keeps the latent
# in float (its F16 rounding of K and V is mirrored by the reference kernels).
set -euo pipefail
compile=$1 shared=$2 data=$3 out=$4
models=$shared
[ -f "$shared/index.json" ] || models=$data
mkdir -p "$out"
for f in "$models"/tiny-*.gguf; do
  m=$(basename "$f" .gguf)
  case $m in
    tiny-ds*) forms="absorbed decompressed" ;;
    *) forms="plain" ;;
  esac
  for form in $forms; do
    mla=auto
    [ "$form" = plain ] || mla=$form
    "$compile" "$f" --gpu-mem 0 --kv-type f32 --mla "$mla" --ctx 512 -o "$out/$m-$form.ktp"
  done
  # Expert deferral (decode), against the exact plan of the first form.
  case $m in
    *llama*) ;;
    *) mla=auto; [ "${forms%% *}" = plain ] || mla=${forms%% *}
       "$compile" "$f" --gpu-mem 0 --kv-type f32 --mla "$mla" --ctx 512 --defer-experts 1 -o "$out/$m-defer1.ktp"
       # The hot-expert split (a random half of each layer's experts in a
       # second call over their gathered slices) checked on the CPU.
       "$compile" "$f" --gpu-mem 0 --kv-type f32 --mla "$mla" --ctx 512 --split-experts-test 7 -o "$out/$m-split.ktp" ;;
  esac
  # KTransformers' AMXBF16 experts (rules/cpu-only-amx-bf16.yaml) on the
  # quantized MoE models: experts with 32+ of a prompt's rows in BF16.
  case $m in
    *llama*|*F32*) ;;
    *) mla=auto; [ "${forms%% *}" = plain ] || mla=${forms%% *}
       "$compile" "$f" "$(dirname "$0")/../rules/cpu-only-amx-bf16.yaml" --kv-type f32 --mla "$mla" --ctx 512 \
         -o "$out/$m-bf16.ktp"
       # KTransformers' AMXInt8 / AMXInt4: the experts repacked to int8 / int4 at load.
       "$compile" "$f" "$(dirname "$0")/../rules/cpu-only-amx-int8.yaml" --kv-type f32 --mla "$mla" --ctx 512 \
         -o "$out/$m-int8.ktp"
       "$compile" "$f" "$(dirname "$0")/../rules/cpu-only-amx-int4.yaml" --kv-type f32 --mla "$mla" --ctx 512 \
         -o "$out/$m-int4.ktp" ;;
  esac
done
echo "compiled $(ls "$out"/*.ktp | wc -l) plans from $models"
