// Constructors of the engine backends, dispatched by make_engine.
#pragma once
#include <memory>

#include "nightlora/engine/frozen_engine.h"

namespace nl {

std::unique_ptr<FrozenEngine> make_cpu_engine(const Model& model, const EngineOptions& opt);

// Once a backend holds a matrix in its own layout (cpu tiles, device buffers), the file pages
// just read to make it would stay resident as a second copy of the weights: hand them back
// to the kernel. MADV_PAGEOUT never changes what the memory holds (a later read, e.g. the
// embedding lookup of a tied head, faults the bytes in again). Best effort; whole pages only.
void release_file_pages(const TensorView& v);

#ifdef NL_HAVE_VULKAN
// src/engine/vulkan/: built only when CMake found Vulkan and glslc (NL_HAVE_VULKAN).
std::unique_ptr<FrozenEngine> make_vulkan_engine(const Model& model, const EngineOptions& opt);
// True when a Vulkan GPU (discrete, integrated or virtual; not a CPU implementation such as
// lavapipe) with a compute queue is present: what --engine auto chooses the backend by.
bool vulkan_gpu_present();
#endif

}  // namespace nl
