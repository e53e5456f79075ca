// Tokenizer::from_path: a GGUF file or a Hugging Face folder, whichever `path` is.
#include <filesystem>

#include "nightlora/modelio/gguf.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {

std::unique_ptr<Tokenizer> Tokenizer::from_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) return from_hf_dir(path);
  if (!fs::exists(path)) fail(path, "no such file or folder", "pass a GGUF file or a folder with tokenizer.json");
  return from_gguf(*GgufFile::open(path));
}

}  // namespace nl
