// Reads the first and last byte of what a reader says a tensor occupies: with the fuzz build's
// heap-backed files (NL_FILEMAP_HEAP), a byte range that runs past the file is an ASan report.
#pragma once
#include <cstddef>
#include <cstdint>

#include "nightlora/modelio/model.h"

namespace nlfuzz {

inline void touch(const uint8_t* p, size_t n) {
  if (p == nullptr || n == 0) return;
  volatile uint8_t sink = p[0];
  sink = p[n - 1];
  (void)sink;
}

// Every weight view of a loaded model.
inline void touch_weights(const nl::Model& m) {
  const nl::ModelWeights& w = m.weights;
  for (const nl::TensorView* t : {&w.tok_embd, &w.output_norm, &w.output}) touch(t->data, t->nbytes);
  for (const nl::LayerWeights& l : w.layers)
    for (const nl::TensorView* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm,
                                    &l.k_norm, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
      touch(t->data, t->nbytes);
}

}  // namespace nlfuzz
