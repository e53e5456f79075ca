// `nightlora nightly status OUT`: where a nightly job stands, read from its folder alone
// (no lock taken, nothing written): the published adapter, the last decisions, the next
// run's state and the storage used.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace nl {

// {"out", "current", "runs": [{"run", "state", "reason", ...} newest last, at most `last`],
//  "next": {"state": "fresh" | "continue", "run", "failures", "step"}, "storage": {...}}
nlohmann::json nightly_status(const std::string& out, int last = 5);

// The same in a few lines of text.
std::string nightly_status_text(const nlohmann::json& status);

}  // namespace nl
