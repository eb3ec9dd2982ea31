#!/usr/bin/env bash
# Builds, here, what the device machine (H100 + Xeon with AMX, no MLIR) runs: the
# runtime world with CUDA for sm_90a, cudart linked statically, and packs into
# out/device:
#   bin.tar.xz   the test and benchmark binaries (and the .so files they need
#                beyond glibc/libstdc++), xz-compressed: the binaries are ~200 MB,
#                far more than a device call carries; device-run.sh unpacks them.
#   plans/       GPU plans for the end-to-end test (cuda_plan_e2e_test), compiled
#                here by kt-compile (build/release, or $KT_COMPILE): hybrid rules
#                (experts on the CPU) and all-gpu rules, <model>@<config>.ktp.
#   models/      quantized reference models from ../shared/models ($KT_PACK_MODELS),
#                with their llama.cpp logits, for those plans.
# Then, with the device tool:
#   run  command="bash scripts/device-run.sh"  carry=["out/device"]
# Environment: KT_JOBS (build jobs), KT_PACK (regex of binaries to pack, default
# all), KT_PACK_MODELS (space-separated model stems, "" for none), KT_PACK_BIN_ONLY.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset device >/dev/null
cmake --build --preset device -j "${KT_JOBS:-$(nproc)}"
# KT_PACK_BIN_ONLY=1: only the binaries are packed again (plans and models of
# an earlier pack stay), for quick rounds on kernels.
[ "${KT_PACK_BIN_ONLY:-0}" = 1 ] || rm -rf out/device
mkdir -p out/device
stage=build/device-pack
rm -rf "$stage" && mkdir -p "$stage/bin"
# Every test binary (GPU and CPU units: the AMX paths are tested there) and tool.
find build/device/bin -maxdepth 1 -type f -executable | while read -r b; do
  if [[ -z "${KT_PACK:-}" || "$(basename "$b")" =~ ${KT_PACK} ]]; then cp "$b" "$stage/bin/"; fi
done
strip --strip-unneeded "$stage"/bin/* 2>/dev/null || true
# Shared libraries the binaries need beyond glibc/libstdc++ travel with them.
for b in "$stage"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}' | grep -vE 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl|librt' || true
done | sort -u | while read -r lib; do cp -L "$lib" "$stage/bin/"; done
# One xz stream with a dictionary larger than all binaries together: each carries
# the same CUDA kernels, stored once (~250 MB of binaries -> under 20 MB).
tar -C "$stage" -cf - bin | xz -T1 -9 --lzma2=dict=192MiB > out/device/bin.tar.xz
if [ "${KT_PACK_BIN_ONLY:-0}" = 1 ]; then
  du -sh out/device | awk '{print "packed " $1 " in out/device (binaries only)"}'
  exit 0
fi

# Plans for the GPU end-to-end test. A plan names its GGUF relative to itself,
# so the models stay where the device machine will find them: test/data (part
# of the tree) or out/device/models.
compile=${KT_COMPILE:-build/release/bin/kt-compile}
if [ -x "$compile" ]; then
  mkdir -p out/device/plans
  plan() {  # model-path config rules [extra args...]
    local gguf=$1 cfg=$2 rules=$3; shift 3
    "$compile" "$gguf" "$rules" --kv-type f32 --ctx 512 "$@" -o "out/device/plans/$(basename "$gguf" .gguf)@$cfg.ktp"
  }
  d=test/data
  plan $d/tiny-dsv3-F32.gguf hybrid rules/deepseek-v3-hybrid.yaml
  plan $d/tiny-dsv3-F32.gguf all-gpu-absorbed rules/all-gpu.yaml --mla absorbed
  plan $d/tiny-dsv3-F32.gguf all-gpu-decompressed rules/all-gpu.yaml --mla decompressed
  plan $d/tiny-qwen2moe-F32.gguf hybrid rules/qwen2-moe-hybrid.yaml
  plan $d/tiny-qwen2moe-F32.gguf all-gpu rules/all-gpu.yaml
  plan $d/tiny-mixtral-F32.gguf hybrid rules/mixtral-hybrid.yaml
  plan $d/tiny-mixtral-F32.gguf all-gpu rules/all-gpu.yaml
  plan $d/tiny-llama-F32.gguf all-gpu rules/all-gpu.yaml
  # Streamed experts (prefill.long from one token on: every prefill step
  # computes the CPU's experts on the GPU from host memory).
  plan $d/tiny-dsv3-F32.gguf hybrid-stream rules/deepseek-v3-hybrid.yaml --stream-experts 1
  plan $d/tiny-qwen2moe-F32.gguf hybrid-stream rules/qwen2-moe-hybrid.yaml --stream-experts 1
  plan $d/tiny-mixtral-F32.gguf hybrid-stream rules/mixtral-hybrid.yaml --stream-experts 1
  # Hot experts from random profiles (kt-place-experts): each layer's routed
  # experts split between the GPU and the CPU, differently per seed and budget;
  # 6 MiB holds every expert of the tiny V3.
  hot() { plan "$@" --prefill-len 64; }
  hot $d/tiny-dsv3-F32.gguf hot-r1 rules/deepseek-v3-hybrid.yaml --gpu-mem 3MiB --profile random:1
  hot $d/tiny-dsv3-F32.gguf hot-r2 rules/deepseek-v3-hybrid.yaml --gpu-mem 3584KiB --profile random:2 --mla decompressed
  hot $d/tiny-dsv3-F32.gguf hot-all rules/deepseek-v3-hybrid.yaml --gpu-mem 6MiB --profile random:3
  hot $d/tiny-qwen2moe-F32.gguf hot-r4 rules/qwen2-moe-hybrid.yaml --gpu-mem 2560KiB --profile random:4
  hot $d/tiny-mixtral-F32.gguf hot-r5 rules/mixtral-hybrid.yaml --gpu-mem 2560KiB --profile random:5
  hot $d/tiny-dsv3-F32.gguf hot-r1-stream rules/deepseek-v3-hybrid.yaml --gpu-mem 3MiB --profile random:1 \
    --stream-experts 1
  shared=../shared/models
  if [ -f "$shared/index.json" ]; then
    mkdir -p out/device/models/ref
    cp "$shared/index.json" out/device/models/
    for m in ${KT_PACK_MODELS-tiny-dsv3-Q4_K_M tiny-dsv3-IQ4_XS}; do
      [ -f "$shared/$m.gguf" ] || continue
      cp "$shared/$m.gguf" out/device/models/
      cp "$shared"/ref/"$m".* out/device/models/ref/
      case $m in
        tiny-ds*) plan out/device/models/$m.gguf hybrid rules/deepseek-v3-hybrid.yaml
                  plan out/device/models/$m.gguf hybrid-stream rules/deepseek-v3-hybrid.yaml --stream-experts 1
                  plan out/device/models/$m.gguf all-gpu rules/all-gpu.yaml
                  plan out/device/models/$m.gguf hot-r6 rules/deepseek-v3-hybrid.yaml --prefill-len 64 \
                    --gpu-mem 5MiB --profile random:6 ;;
        tiny-qwen2moe*) plan out/device/models/$m.gguf hybrid rules/qwen2-moe-hybrid.yaml
                        plan out/device/models/$m.gguf all-gpu rules/all-gpu.yaml ;;
        *) plan out/device/models/$m.gguf all-gpu rules/all-gpu.yaml ;;
      esac
    done
  fi
  echo "compiled $(ls out/device/plans | wc -l) GPU plans"
else
  echo "no kt-compile at $compile: no GPU plans (cuda_plan_e2e_test will skip)"
fi
# Synthetic full-size models for the benchmarks (../shared/PEERS.md's files):
# synthesized here only long enough to compile their plans; kt-gguf synth is
# deterministic, so device-run.sh writes the same bytes there and the plans'
# fingerprints match. KT_PACK_BENCH=0 leaves them out.
if [ "${KT_PACK_BENCH:-1}" = 1 ] && [ -x "$compile" ]; then
  mkdir -p out/device/bench/plans out/device/bench/models
  tmp=$(mktemp -d /tmp/kt-bench-models.XXXX)
  trap 'rm -rf "$tmp"' EXIT
  synth() {  # name, synth args (recorded for device-run.sh)
    local name=$1; shift
    build/device/bin/kt-gguf synth "$@" -o "$tmp/$name.gguf" >/dev/null
    ln -sf "$tmp/$name.gguf" "out/device/bench/models/$name.gguf"
    echo "$name $*" >> out/device/bench/models.txt
  }
  bplan() {  # model config [kt-compile args...]
    local m=$1 cfg=$2; shift 2
    "$compile" "out/device/bench/models/$m.gguf" "$@" --ctx 4096 -o "out/device/bench/plans/$m@$cfg.ktp" 2>/dev/null
  }
  rm -f out/device/bench/models.txt
  synth v2lite --like deepseek-v2-lite --mla-split
  bplan v2lite cpu --gpu-mem 0
  bplan v2lite cpu-bf16 rules/cpu-only-amx-bf16.yaml
  # KTransformers' AMXInt8 / AMXInt4: the CPU's experts repacked at load.
  bplan v2lite cpu-int8 rules/cpu-only-amx-int8.yaml
  bplan v2lite cpu-int4 rules/cpu-only-amx-int4.yaml
  bplan v2lite hybrid rules/deepseek-v2-lite-hybrid.yaml
  # The same without streamed experts: long prefill with the CPU's GEMMs.
  bplan v2lite hybrid-nostream rules/deepseek-v2-lite-hybrid.yaml --stream-experts off
  # The hybrid rules with the CPU's experts as AMXInt4 (decode reads ~4.25 bits a
  # weight instead of Q4_K_M's 4.5-8.5).
  int4rules() { sed 's/^\( *\)prefill_op: "KExpertsCPU"/&\n\1backend: "AMXInt4"/' "$1" > "$2"; grep -q AMXInt4 "$2"; }
  int4rules rules/deepseek-v2-lite-hybrid.yaml "$tmp/v2lite-hybrid-int4.yaml" &&
    bplan v2lite hybrid-int4 "$tmp/v2lite-hybrid-int4.yaml"
  bplan v2lite all-gpu rules/all-gpu.yaml
  # Issue 13: hot experts and deferral (hotplans below). KT_PACK_HOT=0 skips them.
  # Each plan may carry NAME.args: kt-bench e2e arguments device-run.sh adds
  # (the routing its figures are measured under).
  args() { echo "$2" > "out/device/bench/plans/$1.args"; }
  # Routing profiles recorded here on the tiny models of the same family
  # (kt-exec --routing-profile-out, the three reference prompts, 64 tokens
  # each), for the full-size models' forced routing and placement (a profile
  # of fewer experts stretches: runtime/routing_hooks.cpp).
  tinyprofile() {  # tiny-model stem -> out/device/bench/profiles/STEM.json
    local m=$1 p parts=()
    [ -f "../shared/models/$m.gguf" ] || return 1
    mkdir -p out/device/bench/profiles
    "$compile" "../shared/models/$m.gguf" --gpu-mem 0 -o "$tmp/$m.ktp" >/dev/null
    for p in p1 p2 p3; do
      "$(dirname "$compile")/kt-exec" "$tmp/$m.ktp" --prompt-file "../shared/models/prompts/$p.txt" -n 64 \
        --routing-profile-out "$tmp/$m-$p.json" >/dev/null 2>&1
      parts+=("$tmp/$m-$p.json")
    done
    build/device/bin/kt-gguf profile-merge "${parts[@]}" -o "out/device/bench/profiles/$m.json"
  }
  hotplans() {  # model rules tiny-model
    local m=$1 rules=$2 tiny=$3 ex budget gpu_w experts mem mem25 pct r
    [ "${KT_PACK_HOT:-1}" = 1 ] || return 0
    ex=$("$compile" "$tmp/$m.gguf" $rules --ctx 4096 --gpu-mem 70GiB --explain)
    budget=$("$compile" "$tmp/$m.gguf" $rules --ctx 4096 --gpu-mem 70GiB --emit=mlir | grep -oE 'gpu_budget = [0-9]+' | grep -oE '[0-9]+$')
    gpu_w=$(echo "$ex" | awk '$1 == "cuda:0:" {print $2}')
    experts=$(echo "$ex" | awk '$2 == "experts" {s += $5} END {printf "%.0f", s}')
    build/device/bin/kt-gguf profile-synth "$tmp/$m.gguf" --routing zipf:1.0 -o "$tmp/$m-zipf.json"
    local routings="zipf" spec_zipf="zipf:1.0" spec_tiny=""
    if tinyprofile "$tiny"; then
      spec_tiny="profile:out/device/bench/profiles/$tiny.json"
      build/device/bin/kt-gguf profile-synth "$tmp/$m.gguf" --routing "$spec_tiny" -o "$tmp/$m-tiny.json"
      routings="zipf tiny"
    fi
    # Per routing r (Zipf(1.0), the tiny model's profile): the plan without a
    # profile, hot experts placed from r's expected counts in GPU memory that
    # leaves 25%, 50%, 100% of the routed experts' bytes room beyond the hybrid
    # plan's weights, and deferral K = 1, 2; each measured under r.
    for r in $routings; do
      local spec; spec=$([ "$r" = zipf ] && echo "$spec_zipf" || echo "$spec_tiny")
      bplan $m hybrid-$r $rules
      for pct in 25 50 100; do
        mem=$(( (70 << 30) - budget + gpu_w + experts * pct / 100 + (16 << 20) ))
        bplan $m hot$pct-$r $rules --gpu-mem $mem --profile "$tmp/$m-$r.json" --cpu-bandwidth 90
      done
      bplan $m defer1-$r $rules --defer-experts 1
      bplan $m defer2-$r $rules --defer-experts 2
      mem25=$(( (70 << 30) - budget + gpu_w + experts / 4 + (16 << 20) ))
      bplan $m hot25-defer1-$r $rules --gpu-mem $mem25 --profile "$tmp/$m-$r.json" --cpu-bandwidth 90 --defer-experts 1
      for c in hybrid hot25 hot50 hot100 defer1 defer2 hot25-defer1; do args "$m@$c-$r" "--routing $spec"; done
    done
    echo "$m: experts $((experts >> 20)) MiB, hybrid GPU weights $((gpu_w >> 20)) MiB"
  }
  hotplans v2lite rules/deepseek-v2-lite-hybrid.yaml tiny-dsv2lite-Q4_K_M
  synth v3-5l --like deepseek-v3 --layers 5 --vocab-size 102400 --mla-split
  bplan v3-5l hybrid rules/deepseek-v3-hybrid.yaml
  bplan v3-5l hybrid-nostream rules/deepseek-v3-hybrid.yaml --stream-experts off
  int4rules rules/deepseek-v3-hybrid.yaml "$tmp/v3-hybrid-int4.yaml" && bplan v3-5l hybrid-int4 "$tmp/v3-hybrid-int4.yaml"
  bplan v3-5l all-gpu rules/all-gpu.yaml
  hotplans v3-5l rules/deepseek-v3-hybrid.yaml tiny-dsv3-Q4_K_M
  rm -f out/device/bench/models/*.gguf
  echo "compiled $(ls out/device/bench/plans/*.ktp | wc -l) benchmark plans"
fi
du -sh out/device | awk '{print "packed " $1 " in out/device"}'
