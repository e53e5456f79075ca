// Helpers shared by the inference tests: reading the golden JSON files, copying a GGUF model
// with some tensors changed, and comparing logit vectors.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nightlora/modelio/gguf.h"
#include "test_util.h"

namespace nltest {

inline nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_text(p)); }

// Largest |a[i] - b[i]| (inf when the sizes differ).
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// A tensor as the copy should write it: its type, shape and bytes.
struct TensorEdit {
  nl::QType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};

// Copies GGUF `src` to `dst` (all metadata, all tensors). For each tensor, `edit` may return
// std::nullopt to keep it, or a TensorEdit to replace it; tensors named in `drop` are left
// out. `extra` runs last and may add or change metadata/tensors.
inline void copy_gguf(const fs::path& src, const fs::path& dst,
                      const std::function<std::optional<TensorEdit>(const nl::GgufTensorInfo&)>& edit,
                      const std::vector<std::string>& drop = {},
                      const std::function<void(nl::GgufWriter&)>& extra = {}) {
  auto f = nl::GgufFile::open(src.string());
  nl::GgufWriter w;
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") w.set(k, v);
  std::vector<std::shared_ptr<TensorEdit>> keep;  // edited bytes must outlive write()
  for (const auto& t : f->tensors()) {
    if (std::find(drop.begin(), drop.end(), t.name) != drop.end()) continue;
    std::optional<TensorEdit> e = edit ? edit(t) : std::nullopt;
    if (e) {
      keep.push_back(std::make_shared<TensorEdit>(std::move(*e)));
      w.add_tensor_data(t.name, keep.back()->type, keep.back()->ne, keep.back()->bytes.data());
    } else {
      w.add_tensor_data(t.name, t.type, t.ne, t.data);
    }
  }
  if (extra) extra(w);
  w.write(dst.string());
}

}  // namespace nltest
