// Placeholder until the Hugging Face folder loader lands.
#include "loaders.h"
#include "nightlora/util/error.h"
namespace nl {
std::unique_ptr<Model> load_hf_model(const std::string& dir) { fail(dir, "Hugging Face folder loading not implemented yet"); }
}  // namespace nl
