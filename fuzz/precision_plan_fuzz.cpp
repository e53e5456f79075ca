// Fuzz target: a precision-plan file (`train --precision-plan FILE`, OUT/precision_plan.json,
// and the plan inside a checkpoint's header). The input is parsed with an expected layer count
// (the first byte: 0 = any, else 1..255), printed as the table `train` shows, and, when
// accepted, written back to JSON, which must parse again to the same plan.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "nightlora/host/precision_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t expect_layers = data[0] == 0 ? -1 : data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  nlfuzz::run_guarded([&] {
    const nl::PrecisionPlan plan = nl::PrecisionPlan::parse(text, expect_layers, "plan.json");
    (void)plan.table();
    const nl::PrecisionPlan again = nl::PrecisionPlan::parse(plan.to_json().dump(), expect_layers, "re-written");
    if (again.to_json() != plan.to_json()) {
      std::fprintf(stderr, "nlfuzz: FINDING: a precision plan changed through to_json + parse\n");
      std::abort();
    }
  });
  return 0;
}
