// nl_model_* and nl_adapter_*: loading a model once (nl::ResidentModel) and adapters for it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "capi/objects.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/adapter_spec.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/chat_template.h"
#include "nightlora/tokenizer/tokenizer.h"

namespace nl::capi {

Registry<nl_model>& models() {
  static Registry<nl_model> r("model");
  return r;
}
Registry<nl_adapter>& adapters() {
  static Registry<nl_adapter> r("adapter");
  return r;
}

std::vector<std::shared_ptr<nl_adapter>> held_adapters(nl_adapter* const* handles, size_t n, const nl_model* model,
                                                       const char* function) {
  std::vector<std::shared_ptr<nl_adapter>> held;
  if (n == 0) return held;
  if (!handles) misuse(function, "adapters is NULL but n_adapters is " + std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    held.push_back(adapters().get(handles[i], function));
    if (held.back()->model.get() != model)
      misuse(function, "adapter " + std::to_string(i) + " (" + held.back()->path + ") was loaded for another model");
  }
  return held;
}

nl::LoraAdapter stacked(const std::vector<std::shared_ptr<nl_adapter>>& held) {
  std::vector<ScaledAdapter> scaled;
  scaled.reserve(held.size());
  for (const auto& a : held) scaled.push_back({AdapterSpec{a->path, a->scale.load()}, a->lora});
  return stack_adapters(scaled);
}

}  // namespace nl::capi

using namespace nl::capi;

namespace {
const size_t kModelOptionsV1 = sizeof(nl_model_options);

void copy_text(char* dst, size_t cap, const std::string& s) {
  const size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}
}  // namespace

extern "C" {

NL_API void nl_model_options_init(nl_model_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  o->threads = 0;
  o->engine = "cpu";
}

NL_API nl_status nl_model_load(const char* path, const nl_model_options* options, nl_model** out) {
  return api_call([&] {
    require(path, "nl_model_load", "path");
    require(out, "nl_model_load", "out");
    *out = nullptr;
    const nl_model_options o = options_or_defaults(options, nl_model_options_init, kModelOptionsV1, "nl_model_load");
    if (o.threads < 0) nl::fail("nl_model_load", "threads must be 0 (all cores) or more");
    nl::EngineOptions eo;
    eo.threads = o.threads;
    if (o.engine) eo.backend = o.engine;
    auto m = std::make_shared<nl_model>();
    m->resident = std::make_unique<nl::ResidentModel>(path, eo);
    *out = models().add(std::move(m));
  });
}

NL_API nl_status nl_model_free(nl_model* model) {
  return api_call([&] {
    if (model) models().remove(model, "nl_model_free");
  });
}

NL_API nl_status nl_model_get_info(const nl_model* model, nl_model_info* out) {
  return api_call([&] {
    std::shared_ptr<nl_model> m = models().get(model, "nl_model_get_info");
    require(out, "nl_model_get_info", "out");
    const nl::Model& mm = m->resident->model();
    const nl::ModelConfig& c = mm.config;
    std::memset(out, 0, sizeof(*out));
    out->n_layer = c.n_layer;
    out->d_model = c.d_model;
    out->n_head = c.n_head;
    out->n_kv_head = c.n_kv_head;
    out->d_ff = c.d_ff;
    out->vocab = c.vocab;
    out->context = c.context;
    copy_text(out->arch, sizeof(out->arch), nl::arch_name(c.arch));
    if (mm.tokenizer && !mm.tokenizer->chat_template().empty()) {
      try {
        copy_text(out->chat_format, sizeof(out->chat_format),
                  nl::chat_format_name(nl::detect_chat_format(mm.tokenizer->chat_template(), mm.source_path)));
      } catch (const nl::Error&) {  // a template we do not render: "" (nl_chat says why)
      }
    }
  });
}

NL_API nl_status nl_adapter_load(nl_model* model, const char* path, float scale, nl_adapter** out) {
  return api_call([&] {
    std::shared_ptr<nl_model> m = models().get(model, "nl_adapter_load");
    require(path, "nl_adapter_load", "path");
    require(out, "nl_adapter_load", "out");
    *out = nullptr;
    if (!std::isfinite(scale)) nl::fail("nl_adapter_load", "the scale must be a finite number");
    auto a = std::make_shared<nl_adapter>();
    a->model = m;
    a->path = path;
    a->lora = nl::load_adapter(path, m->resident->model());
    a->scale = scale;
    *out = adapters().add(std::move(a));
  });
}

NL_API nl_status nl_adapter_set_scale(nl_adapter* adapter, float scale) {
  return api_call([&] {
    std::shared_ptr<nl_adapter> a = adapters().get(adapter, "nl_adapter_set_scale");
    if (!std::isfinite(scale)) nl::fail("nl_adapter_set_scale", "the scale must be a finite number");
    a->scale = scale;
  });
}

NL_API nl_status nl_adapter_get_scale(const nl_adapter* adapter, float* scale) {
  return api_call([&] {
    std::shared_ptr<nl_adapter> a = adapters().get(adapter, "nl_adapter_get_scale");
    require(scale, "nl_adapter_get_scale", "scale");
    *scale = a->scale.load();
  });
}

NL_API nl_status nl_adapter_free(nl_adapter* adapter) {
  return api_call([&] {
    if (adapter) adapters().remove(adapter, "nl_adapter_free");
  });
}

}  // extern "C"
