// summary.md of a nightly run: what it trained on, both adapters' scores, the decision and
// why, the rule, and the storage the job uses.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "nightlora/eval/nightly.h"

namespace nl {

// run_info: run.json; decision: what decision.json will hold; storage: storage_line().
std::string nightly_summary_markdown(const NightlyResult& r, const nlohmann::json& run_info,
                                     const nlohmann::json& decision, const std::string& storage,
                                     const std::string& report_note);

}  // namespace nl
