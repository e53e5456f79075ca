// The precision plan itself: lookup, JSON form (validated on load) and the printed table.
// Calibration (choosing a plan by measurement) is in precision_calibration.cpp.
#include "nightlora/host/precision_plan.h"

#include <cstdio>

#include "nightlora/util/error.h"
#include "nightlora/util/json_read.h"

namespace nl {

namespace {

constexpr const char* kFormat = "nightlora-precision-plan";
constexpr int kVersion = 1;

char mode_letter(Precision p) {
  switch (p) {
    case Precision::F32: return 'F';
    case Precision::F16: return 'H';
    case Precision::Int8: return 'I';
  }
  return '?';
}

// Reads one mode name, with an error that names where it is and what is accepted.
Precision mode_from_json(const nlohmann::json& v, const std::string& where) {
  if (!v.is_string()) fail(where, "a precision mode must be a string, found " + json_brief(v), "use \"f32\", \"f16\" or \"int8\"");
  const std::string s = v.get<std::string>();
  if (s == "f32") return Precision::F32;
  if (s == "f16") return Precision::F16;
  if (s == "int8") return Precision::Int8;
  fail(where, "unknown precision mode \"" + s + "\"", "use \"f32\", \"f16\" or \"int8\"");
}

// A version as the message shows it: a number as written, anything else described.
std::string version_text(const nlohmann::json& v) { return v.is_number() ? v.dump() : json_brief(v); }

const char* const kProductKeys[kNumFrozenProducts] = {"forward", "recompute", "input_grad"};

}  // namespace

const char* frozen_product_name(FrozenProduct k) {
  const int i = static_cast<int>(k);
  return i >= 0 && i < kNumFrozenProducts ? kProductKeys[i] : "?";
}

PrecisionPlan PrecisionPlan::uniform(int64_t n_layer, Precision p) {
  if (n_layer < 0) fail("precision plan", "negative layer count");
  PrecisionPlan plan;
  plan.n_layer = n_layer;
  plan.modes.assign(static_cast<size_t>(n_layer * kNumProj * kNumFrozenProducts), p);
  plan.head_forward = p;
  plan.head_input_grad = p;
  plan.origin = precision_name(p);
  return plan;
}

int64_t PrecisionPlan::count(Precision m) const {
  int64_t n = (head_forward == m) + (head_input_grad == m);
  for (Precision p : modes) n += p == m;
  return n;
}

nlohmann::json PrecisionPlan::to_json() const {
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < n_layer; ++l) {
    nlohmann::json layer = nlohmann::json::object();
    for (int p = 0; p < kNumProj; ++p) {
      nlohmann::json triple = nlohmann::json::array();
      for (int k = 0; k < kNumFrozenProducts; ++k)
        triple.push_back(precision_name(at(l, static_cast<Proj>(p), static_cast<FrozenProduct>(k))));
      layer[proj_name(static_cast<Proj>(p))] = triple;
    }
    layers.push_back(layer);
  }
  return {{"format", kFormat},
          {"version", kVersion},
          {"origin", origin},
          {"n_layer", n_layer},
          {"products", {kProductKeys[0], kProductKeys[1], kProductKeys[2]}},
          {"layers", layers},
          {"head", {{"forward", precision_name(head_forward)}, {"input_grad", precision_name(head_input_grad)}}},
          {"calibration", calibration}};
}

PrecisionPlan PrecisionPlan::from_json(const nlohmann::json& j, int64_t expect_layers, const std::string& where) {
  const std::string redo = "write it with `nightlora train --precision auto` (it saves precision_plan.json in --out)";
  if (!j.is_object()) fail(where, "a precision plan must be a JSON object", redo);
  const nlohmann::json* format = j.contains("format") ? &j["format"] : nullptr;
  if (!format || !format->is_string() || *format != kFormat)
    fail(where, "not a precision plan (\"format\" is not \"" + std::string(kFormat) + "\")", redo);
  if (!j.contains("version") || j["version"] != kVersion)
    fail(where, "precision plan version " + version_text(j.value("version", nlohmann::json())) + " is not supported (this nightlora reads " +
                    std::to_string(kVersion) + ")",
         redo);
  const nlohmann::json& nl_j = j.value("n_layer", nlohmann::json());
  if (!nl_j.is_number_integer() || nl_j.get<int64_t>() < 0)
    fail(where, "\"n_layer\" must be a non-negative integer, found " + json_brief(nl_j), redo);
  const int64_t n = nl_j.get<int64_t>();
  if (expect_layers >= 0 && n != expect_layers)
    fail(where, "the plan is for " + std::to_string(n) + " layers, the model has " + std::to_string(expect_layers),
         "use a plan made for this model, or --precision auto to calibrate a new one");
  const nlohmann::json& layers = j.value("layers", nlohmann::json());
  if (!layers.is_array() || static_cast<int64_t>(layers.size()) != n)
    fail(where, "\"layers\" must be an array of " + std::to_string(n) + " layers (one per n_layer)", redo);

  PrecisionPlan plan = uniform(n, Precision::F32);
  plan.origin = j.value("origin", nlohmann::json("file")).is_string() ? j.value("origin", std::string("file")) : "file";
  for (int64_t l = 0; l < n; ++l) {
    const std::string lw = where + ": layer " + std::to_string(l);
    const nlohmann::json& layer = layers[static_cast<size_t>(l)];
    if (!layer.is_object()) fail(lw, "must be an object with the keys q, k, v, o, gate, up, down", redo);
    for (auto it = layer.begin(); it != layer.end(); ++it) {
      bool known = false;
      for (int p = 0; p < kNumProj; ++p) known |= it.key() == proj_name(static_cast<Proj>(p));
      if (!known) fail(lw, "unknown projection \"" + it.key() + "\"", "the projections are q, k, v, o, gate, up, down");
    }
    for (int p = 0; p < kNumProj; ++p) {
      const char* pn = proj_name(static_cast<Proj>(p));
      const std::string pw = lw + " " + pn;
      if (!layer.contains(pn)) fail(lw, std::string("projection \"") + pn + "\" is missing", redo);
      const nlohmann::json& triple = layer[pn];
      if (!triple.is_array() || triple.size() != kNumFrozenProducts)
        fail(pw, "must list 3 modes (forward, recompute, input_grad), found " + json_brief(triple), redo);
      for (int k = 0; k < kNumFrozenProducts; ++k)
        plan.set(l, static_cast<Proj>(p), static_cast<FrozenProduct>(k),
                 mode_from_json(triple[static_cast<size_t>(k)], pw + " " + kProductKeys[k]));
    }
  }
  const nlohmann::json& head = j.value("head", nlohmann::json());
  if (!head.is_object() || !head.contains("forward") || !head.contains("input_grad"))
    fail(where, "\"head\" must be an object with \"forward\" and \"input_grad\" modes", redo);
  plan.head_forward = mode_from_json(head["forward"], where + ": head forward");
  plan.head_input_grad = mode_from_json(head["input_grad"], where + ": head input_grad");
  plan.calibration = j.value("calibration", nlohmann::json());
  return plan;
}

PrecisionPlan PrecisionPlan::parse(const std::string& text, int64_t expect_layers, const std::string& where) {
  const nlohmann::json j =
      parse_json(text, where, "give a precision_plan.json written by `nightlora train`, or --precision auto");
  return from_json(j, expect_layers, where);
}

std::string PrecisionPlan::table() const {
  std::string out;
  char buf[160];
  std::snprintf(buf, sizeof buf, "precision plan (%s): per projection forward/recompute/input-grad; F = f32, H = f16, I = int8\n",
                origin.c_str());
  out += buf;
  std::string header = "layer";
  for (int p = 0; p < kNumProj; ++p) {
    std::snprintf(buf, sizeof buf, " %-5s", proj_name(static_cast<Proj>(p)));
    header += buf;
  }
  while (header.back() == ' ') header.pop_back();
  out += header + "\n";
  for (int64_t l = 0; l < n_layer; ++l) {
    std::snprintf(buf, sizeof buf, "%5lld", static_cast<long long>(l));
    out += buf;
    for (int p = 0; p < kNumProj; ++p) {
      out += p == 0 ? " " : "   ";
      for (int k = 0; k < kNumFrozenProducts; ++k) out += mode_letter(at(l, static_cast<Proj>(p), static_cast<FrozenProduct>(k)));
    }
    out += "\n";
  }
  std::snprintf(buf, sizeof buf, " head forward %s, input-grad %s\n", precision_name(head_forward),
                precision_name(head_input_grad));
  out += buf;
  const long long total = static_cast<long long>(modes.size()) + 2;
  std::snprintf(buf, sizeof buf, "totals: %lld int8, %lld f16, %lld f32 (of %lld products)\n",
                static_cast<long long>(count(Precision::Int8)), static_cast<long long>(count(Precision::F16)),
                static_cast<long long>(count(Precision::F32)), total);
  out += buf;
  return out;
}

}  // namespace nl
