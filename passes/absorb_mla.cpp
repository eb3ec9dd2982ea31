// kt-absorb-mla: per phase, the form of DeepSeek's multi-head latent attention.
// Both forms share the cache (the normed latent and the roped shared key per
// token, kv_lora_rank + d_rope values instead of n_heads * (d_nope + d_rope +
// d_v)); they differ in where kv_b goes. Decompressed: K_nope and V of every
// cached token are kv_b times its latent, then ordinary attention. Absorbed:
// W_UK (kv_b's K half) is folded into the query, q_lat = W_UK^T q_nope, and
// W_UV (its V half) into the output, o = W_UV (p . latents), so attention
// reads the latents directly and kv_b is read once per step, not once per
// cached token (DeepSeek-V2 paper, 2.1.2). The lowering emits
// <dev>.mla_attention_absorbed or <dev>.mla_attention from these options.
//
// It runs after kt-place (DESIGN.md lists it before), as the forms' costs are
// the devices'. Prefill defaults to the decompressed form on both (KTransformers'
// default, absorb_for_prefill false): its matmul over the cached latents goes to
// the GPU's tensor cores or the CPU's AMX tiles, and its attention multiplies
// 3.4x fewer values (V2-Lite, CPU only, on the device's Xeon: prefill 2048
// tokens 224-236 -> 300-333 tok/s, 512 tokens 295-335 -> 352-388). The CPU
// kernel itself takes runs of fewer than 32 tokens in the absorbed order.
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"
#include "passes/module_options.h"

namespace kt {
#define GEN_PASS_DEF_ABSORBMLA
#include "passes/Passes.h.inc"

namespace {

class AbsorbMlaPass : public impl::AbsorbMlaBase<AbsorbMlaPass> {
 public:
  using AbsorbMlaBase::AbsorbMlaBase;

  void runOnOperation() override {
    if (mode != "auto" && mode != "absorbed" && mode != "decompressed") {
      getOperation().emitError() << "kt-absorb-mla: mode '" << mode << "' is not auto, absorbed or decompressed";
      return signalPassFailure();
    }
    mlir::Builder b(&getContext());
    getOperation()->walk([&](ir::MlaAttentionOp op) {
      ModuleInterface m = op;
      bool decode = true, prefill = false;
      const char* why = "kt-absorb-mla: auto (decode absorbed; prefill as absorb_for_prefill, default: decompressed)";
      if (mode == "absorbed") {
        prefill = true;
        why = "kt-absorb-mla: mode absorbed";
      } else if (mode == "decompressed") {
        decode = false;
        why = "kt-absorb-mla: mode decompressed";
      } else if (option(m, "absorb_for_prefill")) {
        // KTransformers' kwarg on the attention rule.
        prefill = option_bool(m, "absorb_for_prefill");
      }
      set_options(m, {b.getNamedAttr("absorb_decode", b.getBoolAttr(decode)),
                      b.getNamedAttr("absorb_prefill", b.getBoolAttr(prefill)),
                      b.getNamedAttr("absorb_reason", b.getStringAttr(why))});
    });
  }
};

}  // namespace
}  // namespace kt
