// Helpers for the resume tests: the train command on stories260K, and reading the parts of a
// run folder that must be byte-identical between an interrupted and an uninterrupted run.
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "nightlora/host/checkpoint.h"
#include "test_util.h"

namespace resume_test {

namespace fs = std::filesystem;

// Arguments of a small but complete run: dropout on (so the dropout RNG stream must be
// restored), warmup and cosine schedule (the schedule position), several epochs' worth of a
// shuffled data order (the data cursor and epoch), weight decay and clipping.
inline std::string train_args(const fs::path& model, const fs::path& out, int iters, const std::string& extra = "") {
  const fs::path data = nltest::source_dir() / "data/stories/train.jsonl";
  return "train --model " + nltest::shq(model.string()) + " --data " + nltest::shq(data.string()) + " --out " +
         nltest::shq(out.string()) + " --iters " + std::to_string(iters) +
         " --batch 2 --grad-accum 2 --seq-len 48 --lr 5e-3 --warmup 3 --rank 4 --alpha 8 --dropout 0.1"
         " --weight-decay 0.01 --seed 7 --lora-seed 3 --threads 2 " + extra;
}

// Checkpoint files in `dir`/checkpoints, oldest first.
inline std::vector<fs::path> checkpoints(const fs::path& out) {
  std::vector<fs::path> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out / "checkpoints", ec))
    if (e.path().extension() == ".nlck") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

// The trajectory bytes (adapter, AdamW moments and step count, step, data cursor) of a
// checkpoint file: the payload without the 24-byte checksum footer, less the JSON header.
inline std::string state_bytes(const fs::path& ckpt) {
  std::string file = nltest::read_text(ckpt);
  if (file.size() < 24) return "";
  std::string payload = file.substr(0, file.size() - 24);
  return std::string(nl::checkpoint_state_bytes(payload, ckpt.string()));
}

}  // namespace resume_test
