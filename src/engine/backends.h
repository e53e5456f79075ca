// Constructors of the engine backends, dispatched by make_engine.
#pragma once
#include <memory>

#include "nightlora/engine/frozen_engine.h"

namespace nl {

std::unique_ptr<FrozenEngine> make_cpu_engine(const Model& model, const EngineOptions& opt);

// Once a backend holds a matrix in its own layout (cpu tiles, device buffers), the file pages
// just read to make it would stay resident as a second copy of the weights: drop them from
// the process (MADV_DONTNEED on the read-only file mapping; a later read, e.g. the embedding
// lookup of a tied head, faults the bytes in again). They stay in the page cache, which the
// kernel reclaims when memory is short, so the next command that loads the model reads them
// from there, not from storage. (Until 2026-12-08 MADV_PAGEOUT evicted them from the cache
// too: each command re-read ~90% of the file.) Only a FileMap's pages, whole pages only;
// other memory (a model built in the program) is left alone. Best effort.
void release_file_pages(const TensorView& v);

#ifdef NL_HAVE_VULKAN
// src/engine/vulkan/: built only when CMake found Vulkan and glslc (NL_HAVE_VULKAN).
std::unique_ptr<FrozenEngine> make_vulkan_engine(const Model& model, const EngineOptions& opt);
// True when a Vulkan GPU (discrete, integrated or virtual; not a CPU implementation such as
// lavapipe) with a compute queue is present: what --engine auto chooses the backend by.
bool vulkan_gpu_present();
#endif

}  // namespace nl
