#include "adapter_fit.h"

#include <string>

#include "nightlora/util/error.h"

namespace nl {

void check_adapter_fits(const Model& model, const LoraAdapter& a) {
  const ModelConfig& c = model.config;
  const std::string where = "adapter";
  if (a.n_layer != c.n_layer || a.pairs.size() != static_cast<size_t>(c.n_layer * kNumProj))
    fail(where, "has " + std::to_string(a.n_layer) + " layers, the model " + std::to_string(c.n_layer),
         "use an adapter trained for this model");
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (int p = 0; p < kNumProj; ++p) {
      const LoraPair& pair = a.at(l, static_cast<Proj>(p));
      if (!pair.enabled) continue;
      const TensorView& w = model.weights.layers[static_cast<size_t>(l)].proj(static_cast<Proj>(p));
      const int64_t rank = a.cfg.rank;
      if (rank <= 0 || pair.in != w.cols() || pair.out != w.rows() ||
          pair.A.size() != static_cast<size_t>(rank * w.cols()) || pair.B.size() != static_cast<size_t>(w.rows() * rank))
        fail(where, "layer " + std::to_string(l) + " projection " + proj_name(static_cast<Proj>(p)) + ": shapes (in " +
                        std::to_string(pair.in) + ", out " + std::to_string(pair.out) + ", rank " +
                        std::to_string(rank) + ") do not fit the model's " + std::to_string(w.rows()) + " x " +
                        std::to_string(w.cols()) + " weight",
             "use an adapter trained for this model");
    }
}

}  // namespace nl
