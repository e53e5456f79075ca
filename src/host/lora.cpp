// LoRA configuration parsing and PEFT-style adapter initialisation.
#include "nightlora/host/lora.h"
#include "ops.h"

#include <cmath>
#include <sstream>

#include "det_rng.h"
#include "nightlora/util/error.h"

namespace nl {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Accepts our short names and the Hugging Face module names (q_proj, ..., down_proj).
int proj_index(const std::string& name) {
  for (int p = 0; p < kNumProj; ++p) {
    std::string n = proj_name(static_cast<Proj>(p));
    if (name == n || name == n + "_proj") return p;
  }
  return -1;
}

}  // namespace

std::array<bool, kNumProj> LoraConfig::parse_targets(const std::string& list) {
  std::array<bool, kNumProj> t{};
  const std::string all = trim(list);
  if (all == "all") return {true, true, true, true, true, true, true};
  std::stringstream ss(list);
  std::string item;
  bool any = false;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    int p = proj_index(item);
    if (p < 0)
      fail("--targets '" + list + "'", "unknown projection '" + item + "'",
           "use a comma-separated subset of q,k,v,o,gate,up,down, or all");
    t[static_cast<size_t>(p)] = true;
    any = true;
  }
  if (!any) fail("--targets '" + list + "'", "no projection named", "use a subset of q,k,v,o,gate,up,down, or all");
  return t;
}

std::string LoraConfig::targets_string() const {
  std::string s;
  for (int p = 0; p < kNumProj; ++p)
    if (targets[static_cast<size_t>(p)]) {
      if (!s.empty()) s += ',';
      s += proj_name(static_cast<Proj>(p));
    }
  return s;
}

std::pair<int64_t, int64_t> proj_shape(const ModelConfig& m, Proj p) {
  switch (p) {
    case Proj::Q: return {m.d_model, m.q_dim()};
    case Proj::K: return {m.d_model, m.kv_dim()};
    case Proj::V: return {m.d_model, m.kv_dim()};
    case Proj::O: return {m.q_dim(), m.d_model};
    case Proj::Gate: return {m.d_model, m.d_ff};
    case Proj::Up: return {m.d_model, m.d_ff};
    case Proj::Down: return {m.d_ff, m.d_model};
  }
  return {0, 0};
}

LoraAdapter LoraAdapter::init(const ModelConfig& m, const LoraConfig& cfg) {
  if (cfg.rank <= 0) fail("--rank " + std::to_string(cfg.rank), "the LoRA rank must be positive");
  if (!(cfg.dropout >= 0.0f && cfg.dropout < 1.0f))
    fail("--dropout " + std::to_string(cfg.dropout), "dropout must be in [0, 1)");
  bool any = false;
  for (bool b : cfg.targets) any = any || b;
  if (!any) fail("LoRA targets", "no projection selected", "use a subset of q,k,v,o,gate,up,down");
  LoraAdapter a;
  a.cfg = cfg;
  a.n_layer = m.n_layer;
  a.pairs.resize(static_cast<size_t>(m.n_layer * kNumProj));
  for (int64_t l = 0; l < m.n_layer; ++l) {
    for (int p = 0; p < kNumProj; ++p) {
      if (!cfg.targets[static_cast<size_t>(p)]) continue;
      auto [in, out] = proj_shape(m, static_cast<Proj>(p));
      if (cfg.rank > kMaxLoraRank)
        fail("--rank " + std::to_string(cfg.rank), "rank above " + std::to_string(kMaxLoraRank) + " is not supported",
             "use a rank of at most " + std::to_string(kMaxLoraRank) + " (LoRA ranks are usually 4-64)");
      if (cfg.rank > in || cfg.rank > out)
        fail("--rank " + std::to_string(cfg.rank),
             std::string("rank is larger than a dimension of projection '") + proj_name(static_cast<Proj>(p)) + "' (" +
                 std::to_string(out) + " x " + std::to_string(in) + ")",
             "use a rank of at most " + std::to_string(std::min(in, out)) + " or drop that target");
      LoraPair& pr = a.at(l, static_cast<Proj>(p));
      pr.enabled = true;
      pr.in = in;
      pr.out = out;
      pr.A.resize(static_cast<size_t>(cfg.rank * in));
      pr.B.assign(static_cast<size_t>(out * cfg.rank), 0.0f);
      // PEFT: kaiming_uniform_(A, a=sqrt(5)) gives the bound gain*sqrt(3/fan_in) with
      // gain = sqrt(2/(1+5)), i.e. 1/sqrt(in). Each (layer, projection) has its own stream
      // so changing the targets does not change the other pairs' values.
      SplitMix64 rng(hash_combine(hash_combine(cfg.seed, static_cast<uint64_t>(l)), static_cast<uint64_t>(p)));
      const float bound = 1.0f / std::sqrt(static_cast<float>(in));
      for (float& v : pr.A) v = (2.0f * rng.uniform() - 1.0f) * bound;
    }
  }
  return a;
}

LoraAdapter LoraAdapter::zeros_like() const {
  LoraAdapter z;
  z.cfg = cfg;
  z.n_layer = n_layer;
  z.pairs.resize(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    z.pairs[i].enabled = pairs[i].enabled;
    z.pairs[i].in = pairs[i].in;
    z.pairs[i].out = pairs[i].out;
    z.pairs[i].A.assign(pairs[i].A.size(), 0.0f);
    z.pairs[i].B.assign(pairs[i].B.size(), 0.0f);
  }
  return z;
}

int64_t LoraAdapter::n_params() const {
  int64_t n = 0;
  for (const auto& p : pairs)
    if (p.enabled) n += static_cast<int64_t>(p.A.size() + p.B.size());
  return n;
}

bool LoraAdapter::all_finite() const {
  for (const LoraPair& p : pairs) {
    for (float x : p.A)
      if (!std::isfinite(x)) return false;
    for (float x : p.B)
      if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace nl
