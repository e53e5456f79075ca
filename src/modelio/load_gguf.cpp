// Placeholder until the GGUF model loader lands.
#include "loaders.h"
#include "nightlora/util/error.h"
namespace nl {
std::unique_ptr<Model> load_gguf_model(const std::string& path) { fail(path, "GGUF model loading not implemented yet"); }
}  // namespace nl
