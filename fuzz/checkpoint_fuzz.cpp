// Fuzz target: a training checkpoint (OUT/checkpoints/ckpt-*.nlck, read when `train` resumes).
// The input is the checkpoint's payload; it is read the way resume reads it: verified as a
// checked file (the CRC-32 footer is computed for it, so the fuzzer's bytes reach the decoder
// instead of being stopped by the checksum), decoded (magic, header JSON, identity, progress,
// precision plan, the exact training state), its identity compared with a run's, and, when
// accepted, encoded again: decoding that must give the same state bytes.
// The raw input is also verified as a checked file as it stands (the footer reader).
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/job/atomic_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  const std::string raw = nlfuzz::write_scratch("raw.nlck", payload);
  (void)nl::read_file_checked(raw);  // never throws: reports the damage

  const std::string path = (nlfuzz::scratch_dir() / "ckpt-000000000001.nlck").string();
  nl::write_file_checked(path, payload);
  nlfuzz::run_guarded([&] {
    const std::string read = nl::read_file_checked_or_throw(path);
    if (read != payload) {
      std::fprintf(stderr, "nlfuzz: FINDING: a checked file read back different bytes\n");
      std::abort();
    }
    const nl::Checkpoint c = nl::decode_checkpoint(read, path);
    (void)nl::checkpoint_state_bytes(read, path);
    nlfuzz::run_guarded([&] {
      const nlohmann::json run = {{"model", "m"}, {"data", "d"}, {"config", {{"lr", 1e-3}, {"rank", 8}}}};
      nl::check_identity(c.meta.identity, run, path);
    });
    if (c.precision) (void)c.precision->table();
    const std::string again = nl::encode_checkpoint(c);
    const nl::Checkpoint c2 = nl::decode_checkpoint(again, "re-encoded");
    if (nl::encode_train_state(c2.state) != nl::encode_train_state(c.state)) {
      std::fprintf(stderr, "nlfuzz: FINDING: a checkpoint's state changed through encode + decode\n");
      std::abort();
    }
  });
  return 0;
}
