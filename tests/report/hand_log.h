// Hand-written run folders for the report's tests: log rows as `nightlora train` writes them
// (see include/nightlora/report/run_log.h), with nulls where a figure was not finite, and the
// pieces of a rendered page the tests look at.
#pragma once
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace handlog {

using json = nlohmann::json;

// A train row at step `step`, `t` seconds into the run; loss and grad_norm may be null.
inline json train(int64_t step, json loss, double t, json grad_norm = 1.0, double lr = 1e-3) {
  return {{"type", "train"}, {"step", step},          {"loss", loss},  {"lr", lr},
          {"grad_norm", grad_norm}, {"tokens", 100}, {"tokens_per_s", 100}, {"elapsed_s", t}};
}

inline json skipped(json row, const std::string& reason) {
  row["skipped"] = true;
  row["skip_reason"] = reason;
  return row;
}

inline void write_log(const nltest::TempDir& dir, const std::vector<json>& rows) {
  std::string text;
  for (const json& r : rows) text += r.dump() + "\n";
  nltest::write_text(dir / "log.jsonl", text);
}

// The text of <svg id="id">...</svg>, or "" when the page has no such chart.
inline std::string svg_of(const std::string& html, const std::string& id) {
  const size_t b = html.find("<svg id=\"" + id + "\"");
  if (b == std::string::npos) return "";
  return html.substr(b, html.find("</svg>", b) - b);
}

// The `d` of the path drawn for series `name` (or marker kind, with attr "data-marker").
inline std::string path_of(const std::string& svg, const std::string& name, const std::string& attr = "data-series") {
  std::smatch m;
  const std::regex re(attr + "=\"" + std::regex_replace(name, std::regex(R"([.^$|()\[\]{}*+?\\/])"), R"(\$&)") +
                      "\" d=\"([^\"]*)\"");
  return std::regex_search(svg, m, re) ? m[1].str() : "";
}

inline size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace handlog
