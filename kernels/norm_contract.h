// The device-independent part of the norm kernels' contracts: the params and
// shapes cpu.* and cuda.* rms_norm / add_rms_norm check alike, in one place,
// so the two factories cannot drift apart (each adds only its own limits).
#pragma once

#include <cstdint>

#include "kernels/kernel_bind.h"

namespace kt::kern {

// rms_norm: eps; optional group (columns per norm, default the whole row,
// dividing it); an F32 weight of `group` values; F32 in, out as wide. Fills
// *eps and *group; false (with the Binder's error) when a check fails.
bool bind_rms_norm(Binder& b, const CallSpec& s, float* eps, int64_t* group);

// add_rms_norm: eps; two F32 inputs of one width, two outputs as wide (the
// sum, its norm), an F32 weight of that width. Fills *eps. extra_outputs:
// outputs after those two that the caller checks (cuda.add_rms_norm's rounded
// rows); extra_inputs: F32 addends of that width after those two
// (cuda.add_rms_norm's third).
bool bind_add_rms_norm(Binder& b, const CallSpec& s, float* eps, size_t extra_outputs = 0, size_t extra_inputs = 0);

}  // namespace kt::kern
