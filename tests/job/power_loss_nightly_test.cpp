// Power loss at every point of the nightly job's publish (crash_disk.h): writing run 0002's
// candidate, publishing it as adapters/0002, switching OUT/current over from adapters/0001,
// sealing the run and pruning the old adapter. After each crash OUT/current names a complete
// adapter, the old one or the new one (the new one once the switch was promised), and the
// job's repeatable steps finish the publish with the new adapter's exact files.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "../../src/eval/nightly_runs.h"  // prune_job: the seal's clean-up, as the job runs it
#include "crash_disk.h"
#include "nightlora/eval/nightly.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/lora.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/modelio/model.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

nl::LoraAdapter publishable_adapter(const nl::Model& m, uint64_t seed) {
  nl::LoraConfig lc;
  lc.rank = 2;
  lc.alpha = 4;
  lc.seed = seed;
  nl::LoraAdapter ad = nl::LoraAdapter::init(m.config, lc);
  uint32_t x = static_cast<uint32_t>(seed);
  for (auto& p : ad.pairs)
    for (auto& b : p.B) {
      x = x * 1664525u + 1013904223u;
      b = 0.3f * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
    }
  return ad;
}

const char* kFiles[] = {"adapter.gguf", "adapter_model.safetensors", "adapter_config.json"};

// The files of an adapter folder, by name (missing ones as "(missing)").
std::vector<std::string> files_of(const fs::path& dir) {
  std::vector<std::string> v;
  for (const char* f : kFiles) v.push_back(fs::exists(dir / f) ? nltest::read_text(dir / f) : std::string("(missing)"));
  return v;
}

// The nightly job's steps 3, 5 and 6 for run `name` (nightly.cpp), each skipped when its
// result is already there, as the job skips them when it continues a run.
void candidate_publish_seal(const nl::Model& m, const nl::LoraAdapter& ad, const fs::path& out, const std::string& name) {
  const fs::path run = out / "runs" / name, cand = run / "candidate";
  if (fs::exists(run / "decision.json")) return;  // sealed
  if (!fs::exists(cand / "adapter_config.json")) {
    nl::make_dirs(cand.string());
    nl::save_adapter_gguf(ad, m, (cand / "adapter.gguf").string());
    nl::save_adapter_peft(ad, m, cand.string());  // adapter_config.json last: the marker
  }
  nl::nightly_publish(out.string(), name, cand.string());
  nl::write_file_atomic((run / "decision.json").string(), "{\"outcome\": \"published\"}\n");
  nl::prune_job(out, 1);
}

TEST(PowerLoss, NightlyPublishEveryCrashPointKeepsACompleteCurrentAdapter) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  const std::unique_ptr<nl::Model> m = nl::Model::load(model_path.string());
  const nl::LoraAdapter first = publishable_adapter(*m, 11), second = publishable_adapter(*m, 22);
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  crash::NoSyncFileOps no_sync;
  nl::ScopedFileOps fast(no_sync);

  // The expected files of each adapter, written once the ordinary way.
  nl::save_adapter_gguf(first, *m, (tmp / "ref1/adapter.gguf").string());
  nl::save_adapter_peft(first, *m, (tmp / "ref1").string());
  nl::save_adapter_gguf(second, *m, (tmp / "ref2/adapter.gguf").string());
  nl::save_adapter_peft(second, *m, (tmp / "ref2").string());
  const std::vector<std::string> want1 = files_of(tmp / "ref1"), want2 = files_of(tmp / "ref2");

  // The job as the first night left it: run 0001 published and sealed; run 0002 trained.
  const fs::path disk = tmp / "disk", out = disk / "job";
  fs::create_directories(out / "runs/0002");
  candidate_publish_seal(*m, first, out, "0001");
  ASSERT_EQ(files_of(nl::nightly_current_adapter(out.string())), want1);

  const crash::DiskModel before(disk.string());
  crash::RecordingFileOps rec(disk.string());
  {
    nl::ScopedFileOps use(rec);
    candidate_publish_seal(*m, second, out, "0002");
  }
  EXPECT_TRUE(rec.outside.empty()) << rec.outside.front();
  ASSERT_EQ(files_of(nl::nightly_current_adapter(out.string())), want2);
  ASSERT_FALSE(fs::exists(out / "adapters/0001")) << "the prune keeps only the current adapter";

  const crash::ReplayStats st = crash::replay_every_prefix(before, rec.ops, [&]() -> std::vector<std::string> {
    std::vector<std::string> bad;
    // Right after the crash: `current` is one complete adapter, never a mix or a dangling link.
    try {
      const std::string cur = nl::nightly_current_adapter(out.string());
      const std::vector<std::string> have = cur.empty() ? std::vector<std::string>() : files_of(cur);
      if (have != want1 && have != want2) bad.push_back("OUT/current (" + cur + ") is not a complete published adapter");
      else if (have == want1) (void)nl::load_adapter(cur, *m);
    } catch (const std::exception& e) {
      bad.push_back(std::string("OUT/current cannot be read: ") + e.what());
    }
    // The job continues the run: the same steps, skipping what is done.
    try {
      candidate_publish_seal(*m, second, out, "0002");
      const std::string cur = nl::nightly_current_adapter(out.string());
      if (files_of(cur) != want2) bad.push_back("after the job continued, OUT/current is not the new adapter");
      else if (nl::load_adapter(cur, *m).pairs.size() != second.pairs.size()) bad.push_back("the published adapter does not load");
    } catch (const std::exception& e) {
      bad.push_back(std::string("the job does not continue: ") + e.what());
    }
    return bad;
  });
  std::printf("[ power loss ] nightly publish: %lld calls recorded (%lld promised files), %lld crash points replayed x 3 "
              "kinds = %lld disks, %lld distinct disks resumed\n",
              static_cast<long long>(rec.ops.size()), static_cast<long long>(st.promises),
              static_cast<long long>(st.points), static_cast<long long>(st.disks), static_cast<long long>(st.distinct));
  EXPECT_EQ(st.points, static_cast<int64_t>(rec.ops.size()) + 1);
  for (const std::string& f : st.failures) ADD_FAILURE() << f;
}

}  // namespace
