// Training options for the C API: a JSON object whose keys are `nightlora train`'s option
// names (cli/cmd_train.cpp), read into nl::TrainingJobOptions with the CLI's defaults and the
// CLI's checks of each value.
#pragma once
#include <string>

#include "nightlora/train/training_job.h"

namespace nl::capi {

// Throws nl::Error (bad input) naming the key for malformed JSON, a value that is not a JSON
// object, an unknown key (listing the known ones), a value of the wrong type, or a value the
// CLI would refuse. "seq_len" is read as "seq-len". Sets rank_given, alpha_given and
// targets_given when those keys are present. `data` and `out` are required.
TrainingJobOptions parse_train_options(const std::string& json);

}  // namespace nl::capi
