// Scalar reference products in every precision mode, straight from a (quantized) weight
// tensor: the definitions the cpu engine's kernels (every ISA) are tested against.
//   f32:  nl::reference_forward / nl::reference_input_grad (reference_products.h).
//   f16:  each input row guarded and rounded to f16 (range_guard.h), the f32 reference
//         product, each output row unscaled, guarded and rounded to f16.
//   int8: the definition in kernels_int8.h, computed from the logical indices (no panels).
// The engine's scalar kernels give exactly these values; the SIMD kernels give exactly the
// int8 values and f16 values within one f16 rounding (their f32 products differ by rounding).
#pragma once
#include <cstdint>

#include "nightlora/engine/frozen_engine.h"

namespace nl::engine {

void reference_forward_precision(const TensorView& W, const float* X, int64_t T, float* Y, Precision p);
void reference_input_grad_precision(const TensorView& W, const float* dY, int64_t T, float* dX, Precision p);

}  // namespace nl::engine
