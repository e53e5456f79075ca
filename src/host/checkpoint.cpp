#include "nightlora/host/checkpoint.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "nightlora/util/error.h"
#include "nightlora/util/json_read.h"

namespace nl {

namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'N', 'L', 'T', 'R', 'A', 'I', 'N', '1'};
constexpr int64_t kMaxDim = int64_t{1} << 31;  // sanity bound on a stored dimension: products of two stay far from overflow
// No run comes near 2^53 optimizer steps or examples read; a larger counter is damage (or
// forgery), and would overflow the schedule's and the data order's arithmetic.
constexpr int64_t kMaxCounter = int64_t{1} << 53;
// The fewest bytes a stored LoRA pair takes (enabled flag, two sizes, six value counts), so a
// pair count is checked against the bytes left before anything is allocated for it.
constexpr uint64_t kMinPairBytes = 9 * 8;
// The state's fixed words before its pairs: step, data position, AdamW steps, rank, alpha,
// dropout, targets, LoRA seed, layer count, pair count (write_train_state).
constexpr size_t kStateHeaderWords = 10;

// Gathers the payload's bytes into pieces of kCheckpointPieceBytes and hands each full piece
// to the sink: the one buffer a save holds, whatever the size of the state.
class PieceWriter {
 public:
  explicit PieceWriter(const ByteSink& sink) : sink_(sink) { buf_.reserve(kCheckpointPieceBytes); }
  void u64(uint64_t v) {
    char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    bytes({b, 8});
  }
  void bytes(std::string_view s) {
    while (!s.empty()) {
      const size_t n = std::min(s.size(), kCheckpointPieceBytes - buf_.size());
      buf_.append(s.data(), n);
      s.remove_prefix(n);
      if (buf_.size() == kCheckpointPieceBytes) flush();
    }
  }
  // A count, then the floats as their IEEE-754 bits, little-endian, so the bytes are the values.
  void floats(const std::vector<float>& v) {
    u64(v.size());
    if constexpr (std::endian::native == std::endian::little) {
      bytes({reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)});
    } else {
      for (float f : v) {
        uint32_t w;
        std::memcpy(&w, &f, 4);
        char b[4];
        for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((w >> (8 * i)) & 0xff);
        bytes({b, 4});
      }
    }
  }
  void flush() {
    if (!buf_.empty()) sink_(buf_);
    buf_.clear();
  }

 private:
  const ByteSink& sink_;
  std::string buf_;
};

// Reads the trajectory bytes in order, failing with the byte offset on anything malformed.
struct Reader {
  std::string_view b;
  const std::string& where;
  size_t pos = 0;

  [[noreturn]] void bad(const std::string& what) const {
    fail(where + " (byte " + std::to_string(pos) + ")", "malformed checkpoint: " + what,
         "the file is damaged or from another nightlora version; the previous checkpoint is used when there is one");
  }
  uint64_t u64() {
    if (b.size() - pos < 8) bad("ends early");
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[pos + i])) << (8 * i);
    pos += 8;
    return v;
  }
  int64_t dim(const char* what) {
    uint64_t v = u64();
    if (v > static_cast<uint64_t>(kMaxDim)) bad(std::string(what) + " " + std::to_string(v) + " is out of range");
    return static_cast<int64_t>(v);
  }
  // A run counter, stored as a two's-complement int64.
  int64_t counter(const char* what) {
    const int64_t v = static_cast<int64_t>(u64());
    if (v < 0) bad(std::string(what) + " " + std::to_string(v) + " is negative");
    if (v > kMaxCounter) bad(std::string(what) + " " + std::to_string(v) + " is beyond any run (at most 2^53)");
    return v;
  }
  // A float stored in the low 32 bits of a u64.
  float f32(const char* what) {
    const uint64_t v = u64();
    if (v >> 32) bad(std::string(what) + " is not a stored float");
    const uint32_t bits = static_cast<uint32_t>(v);
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isfinite(f)) bad(std::string(what) + " is not finite");
    return f;
  }
  // Steps over a count and its floats (checked: the count, the bytes left). Returns whether
  // every value is finite.
  bool skip_floats(size_t expect, const char* what) {
    const uint64_t n = u64();
    if (n != expect) bad(std::string(what) + ": " + std::to_string(n) + " values, expected " + std::to_string(expect));
    if ((b.size() - pos) / 4 < n) bad(std::string(what) + " ends early");
    bool finite = true;
    for (size_t i = 0; i < n; ++i) finite &= std::isfinite(value_at(pos + 4 * i));
    pos += 4 * n;
    return finite;
  }
  // A count and its floats into `v`, which already has that size (read_layout checked it).
  void floats_into(std::vector<float>& v, const char* what) {
    if (u64() != v.size() || (b.size() - pos) / 4 < v.size()) bad(std::string(what) + " changed while decoding");
    for (size_t i = 0; i < v.size(); ++i) v[i] = value_at(pos + 4 * i);
    pos += 4 * v.size();
  }
  float value_at(size_t at) const {
    uint32_t w = 0;
    for (int k = 0; k < 4; ++k) w |= static_cast<uint32_t>(static_cast<unsigned char>(b[at + k])) << (8 * k);
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  }
};

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// FNV-1a, 64-bit: a fingerprint, not a security measure (nobody forges a model to resume).
uint64_t fnv1a(const char* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 0x100000001b3ull;
  return h;
}
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;

// `name` is part of a folder member's fingerprint (which file is which), not of a single file's
// (a renamed or copied model is the same model).
std::string fingerprint_file(const fs::path& p, bool with_name) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(p.string(), "cannot read it to fingerprint the run", "check the path and its permissions");
  std::error_code ec;
  const uint64_t size = fs::file_size(p, ec);
  if (ec) fail(p.string(), "cannot get its size: " + ec.message());
  auto hash_range = [&](uint64_t off, uint64_t n, uint64_t h) {
    std::vector<char> buf(static_cast<size_t>(n));
    in.clear();
    in.seekg(static_cast<std::streamoff>(off));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    if (static_cast<uint64_t>(in.gcount()) != n) fail(p.string(), "read failed while fingerprinting");
    return fnv1a(buf.data(), buf.size(), h);
  };
  const uint64_t head = std::min<uint64_t>(size, 4ull << 20);
  const uint64_t head_hash = hash_range(0, head, kFnvBasis);
  uint64_t sample_hash = kFnvBasis;
  const uint64_t chunk = 64ull << 10;
  if (size > head) {
    for (int i = 0; i < 32; ++i) {
      uint64_t off = head + (size - head) * static_cast<uint64_t>(i) / 32;
      sample_hash = hash_range(off, std::min(chunk, size - off), sample_hash);
    }
  }
  return (with_name ? p.filename().string() + ":" : std::string()) + std::to_string(size) + ":" + hex64(head_hash) + ":" + hex64(sample_hash);
}

}  // namespace

namespace {

void write_train_state(const TrainStateView& s, PieceWriter& out) {
  const LoraAdapter& a = s.adapter;
  if (s.adam_m.pairs.size() != a.pairs.size() || s.adam_v.pairs.size() != a.pairs.size())
    fail("checkpoint", "internal: optimizer moments do not match the adapter");
  out.u64(static_cast<uint64_t>(s.step));
  out.u64(static_cast<uint64_t>(s.data_pos));
  out.u64(static_cast<uint64_t>(s.adam_t));
  out.u64(static_cast<uint64_t>(a.cfg.rank));
  uint32_t alpha_bits, dropout_bits;
  std::memcpy(&alpha_bits, &a.cfg.alpha, 4);
  std::memcpy(&dropout_bits, &a.cfg.dropout, 4);
  out.u64(alpha_bits);
  out.u64(dropout_bits);
  uint64_t targets = 0;
  for (int i = 0; i < kNumProj; ++i) targets |= (a.cfg.targets[i] ? 1ull : 0ull) << i;
  out.u64(targets);
  out.u64(a.cfg.seed);
  out.u64(static_cast<uint64_t>(a.n_layer));
  out.u64(a.pairs.size());
  for (size_t i = 0; i < a.pairs.size(); ++i) {
    const LoraPair& p = a.pairs[i];
    out.u64(p.enabled ? 1 : 0);
    out.u64(static_cast<uint64_t>(p.in));
    out.u64(static_cast<uint64_t>(p.out));
    out.floats(p.A);
    out.floats(p.B);
    out.floats(s.adam_m.pairs[i].A);
    out.floats(s.adam_m.pairs[i].B);
    out.floats(s.adam_v.pairs[i].A);
    out.floats(s.adam_v.pairs[i].B);
  }
}

}  // namespace

std::string encode_train_state(const TrainStateView& s) {
  std::string bytes;
  const ByteSink append = [&](std::string_view piece) { bytes += piece; };
  PieceWriter out(append);
  write_train_state(s, out);
  out.flush();
  return bytes;
}

namespace {

// The values' part of each pair: A, B, m.A, m.B, v.A, v.B, each a count then the floats.
constexpr int kValueArrays = 6;

// Reads the counters, the LoRA configuration and every pair's shape, stepping over the values
// (their counts and lengths checked, each value read once for all_finite): everything that can
// be wrong with the bytes is found before anything is decoded into place.
TrainStateLayout read_layout(std::string_view bytes, const std::string& where) {
  Reader r{bytes, where};
  TrainStateLayout s;
  s.step = r.counter("step");
  s.data_pos = r.counter("data position");
  s.adam_t = r.counter("AdamW step count");
  // AdamW steps once per optimizer update at most (never for MeZO, nor for a skipped update).
  if (s.adam_t > s.step)
    r.bad("AdamW step count " + std::to_string(s.adam_t) + " exceeds the step " + std::to_string(s.step));
  LoraConfig cfg;
  cfg.rank = r.dim("rank");
  if (cfg.rank < 1) r.bad("rank 0");
  cfg.alpha = r.f32("LoRA alpha");
  cfg.dropout = r.f32("LoRA dropout");
  uint64_t targets = r.u64();
  if (targets >> kNumProj) r.bad("target set has unknown projections");
  for (int i = 0; i < kNumProj; ++i) cfg.targets[i] = (targets >> i) & 1;
  cfg.seed = r.u64();
  const int64_t n_layer = r.dim("layer count");
  const uint64_t n_pairs = r.u64();
  if (n_pairs != static_cast<uint64_t>(n_layer) * kNumProj) r.bad("pair count does not match the layer count");
  if (n_pairs > (bytes.size() - r.pos) / kMinPairBytes)
    r.bad(std::to_string(n_pairs) + " LoRA pairs cannot fit in the " + std::to_string(bytes.size() - r.pos) + " bytes left");
  s.shape.cfg = cfg;
  s.shape.n_layer = n_layer;
  s.shape.pairs.resize(n_pairs);
  static const char* const kNames[kValueArrays] = {"A", "B", "A", "B", "A", "B"};
  for (size_t i = 0; i < n_pairs; ++i) {
    LoraPair& shape = s.shape.pairs[i];
    const uint64_t enabled = r.u64();
    if (enabled > 1) r.bad("pair enabled flag " + std::to_string(enabled) + " is neither 0 nor 1");
    shape.enabled = enabled == 1;
    shape.in = r.dim("pair input size");
    shape.out = r.dim("pair output size");
    const size_t na = shape.enabled ? static_cast<size_t>(cfg.rank * shape.in) : 0;
    const size_t nb = shape.enabled ? static_cast<size_t>(shape.out * cfg.rank) : 0;
    for (int k = 0; k < kValueArrays; ++k) s.all_finite &= r.skip_floats(k % 2 == 0 ? na : nb, kNames[k]);
  }
  if (r.pos != bytes.size()) r.bad(std::to_string(bytes.size() - r.pos) + " unexpected bytes at the end");
  return s;
}

bool same_shape(const LoraPair& p, const LoraPair& q, int64_t rank) {
  const size_t na = p.enabled ? static_cast<size_t>(rank * p.in) : 0, nb = p.enabled ? static_cast<size_t>(p.out * rank) : 0;
  return p.enabled == q.enabled && p.in == q.in && p.out == q.out && q.A.size() == na && q.B.size() == nb;
}

// Decodes the values into vectors of the layout's shapes, after read_layout has checked the
// bytes: the values go straight into them, in the order stored.
void fill_values(std::string_view bytes, const std::string& where, const LoraAdapter& shape, LoraAdapter& adapter,
                 LoraAdapter& adam_m, LoraAdapter& adam_v) {
  adapter.cfg = adam_m.cfg = adam_v.cfg = shape.cfg;
  Reader r{bytes, where};
  r.pos = kStateHeaderWords * 8;
  for (size_t i = 0; i < shape.pairs.size(); ++i) {
    r.pos += 3 * 8;  // enabled, in, out
    for (std::vector<float>* v : {&adapter.pairs[i].A, &adapter.pairs[i].B, &adam_m.pairs[i].A, &adam_m.pairs[i].B,
                                  &adam_v.pairs[i].A, &adam_v.pairs[i].B})
      r.floats_into(*v, "values");
  }
}

}  // namespace

TrainStateLayout read_train_state_layout(std::string_view bytes, const std::string& where) {
  return read_layout(bytes, where);
}

void decode_train_state_into(std::string_view bytes, const std::string& where, LoraAdapter& adapter,
                             LoraAdapter& adam_m, LoraAdapter& adam_v) {
  const TrainStateLayout layout = read_layout(bytes, where);  // all checks, before any value is written
  const LoraAdapter& shape = layout.shape;
  for (const LoraAdapter* a : {&adapter, &adam_m, &adam_v}) {
    bool same = a->n_layer == shape.n_layer && a->cfg.rank == shape.cfg.rank && a->pairs.size() == shape.pairs.size();
    for (size_t i = 0; same && i < shape.pairs.size(); ++i) same = same_shape(shape.pairs[i], a->pairs[i], shape.cfg.rank);
    if (!same)
      fail(where, "the saved adapter's shapes (rank " + std::to_string(shape.cfg.rank) + ", " +
                      std::to_string(shape.n_layer) + " layers) do not match the adapter it is decoded into",
           "resume with the model and LoRA settings it was trained with");
  }
  fill_values(bytes, where, shape, adapter, adam_m, adam_v);
}

TrainState decode_train_state(std::string_view bytes, const std::string& where) {
  const TrainStateLayout layout = read_layout(bytes, where);
  TrainState s;
  s.step = layout.step;
  s.data_pos = layout.data_pos;
  s.adam_t = layout.adam_t;
  // The shapes, sized (read_layout found every value in the bytes, so no size is beyond them),
  // then filled.
  s.adapter = layout.shape;
  for (LoraPair& p : s.adapter.pairs) {
    p.A.resize(p.enabled ? static_cast<size_t>(s.adapter.cfg.rank * p.in) : 0);
    p.B.resize(p.enabled ? static_cast<size_t>(p.out * s.adapter.cfg.rank) : 0);
  }
  s.adam_m = s.adapter;
  s.adam_v = s.adapter;
  fill_values(bytes, where, layout.shape, s.adapter, s.adam_m, s.adam_v);
  return s;
}

void write_checkpoint(const CheckpointMeta& meta, const TrainStateView& state,
                      const std::optional<PrecisionPlan>& precision, const ByteSink& sink) {
  nlohmann::json header = {{"format", "nightlora-train-checkpoint"}, {"version", 1},
                           {"identity", meta.identity}, {"progress", meta.progress}};
  if (precision) {
    nlohmann::json plan = precision->to_json();
    if (plan["calibration"].is_object()) plan["calibration"].erase("measured");
    header["precision_plan"] = plan;
  }
  const std::string h = header.dump();
  PieceWriter out(sink);
  out.bytes({kMagic, sizeof kMagic});
  out.u64(h.size());
  out.bytes(h);
  write_train_state(state, out);
  out.flush();
}

std::string encode_checkpoint(const Checkpoint& c) {
  std::string payload;
  write_checkpoint(c.meta, c.state, c.precision, [&](std::string_view piece) { payload += piece; });
  return payload;
}

namespace {
// Splits a payload into header JSON text and state bytes.
std::pair<std::string_view, std::string_view> split_payload(std::string_view p, const std::string& where) {
  auto bad = [&](const std::string& what) -> void {
    fail(where, "not a training checkpoint: " + what, "the file is damaged or not written by `nightlora train`");
  };
  if (p.size() < 16 || std::memcmp(p.data(), kMagic, 8) != 0) bad("wrong magic");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(p[8 + i])) << (8 * i);
  if (n > p.size() - 16) bad("header length " + std::to_string(n) + " exceeds the file");
  return {p.substr(16, n), p.substr(16 + n)};
}
}  // namespace

std::string_view checkpoint_state_bytes(std::string_view payload, const std::string& where) {
  return split_payload(payload, where).second;
}

Checkpoint decode_checkpoint(std::string_view payload, const std::string& where) {
  Checkpoint c = decode_checkpoint_header(payload, where);
  c.state = decode_train_state(split_payload(payload, where).second, where);
  return c;
}

Checkpoint decode_checkpoint_header(std::string_view payload, const std::string& where) {
  const std::string_view htext = split_payload(payload, where).first;
  const char* hint = "the file is damaged or not written by `nightlora train`; the previous checkpoint is used when there is one";
  const nlohmann::json header = parse_json(htext, where, hint);
  const JsonPlace h(header, where, hint);
  h.object();
  if (h.string_or("format", "") != "nightlora-train-checkpoint") h.fail("not the header of a nightlora training checkpoint");
  const int64_t version = h.key("version").integer();
  if (version != 1)
    h.key("version").fail("checkpoint format version " + std::to_string(version) + " is not supported (this nightlora reads 1)",
                          "resume it with the nightlora version that wrote it");
  Checkpoint c;
  // What check_identity and the trainer read from these is checked here, so a damaged header
  // is refused naming its key, not met later as a type error.
  c.meta.identity = nlohmann::json::object();
  if (std::optional<JsonPlace> id = h.find("identity")) {
    c.meta.identity = id->object();
    if (std::optional<JsonPlace> config = id->find("config")) config->object();
  }
  c.meta.progress = nlohmann::json::object();
  if (std::optional<JsonPlace> progress = h.find("progress")) {
    c.meta.progress = progress->object();
    // The figures the trainer continues from: present means a value of the right type.
    const nlohmann::json& p = c.meta.progress;
    if (p.contains("elapsed_s")) progress->member("elapsed_s", p["elapsed_s"]).number(0.0);
    if (p.contains("tokens")) progress->member("tokens", p["tokens"]).integer(0);
  }
  if (h.has("precision_plan"))
    c.precision = PrecisionPlan::from_json(header["precision_plan"], -1, where + ": precision_plan");
  return c;
}

std::string fingerprint_path(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  if (fs::is_directory(p, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(p, ec))
      if (e.is_regular_file()) files.push_back(e.path());
    if (ec) fail(path, "cannot list the folder to fingerprint it: " + ec.message());
    std::sort(files.begin(), files.end());
    std::string out;
    for (const auto& f : files) out += (out.empty() ? "" : ";") + fingerprint_file(f, true);
    return out;
  }
  return fingerprint_file(p, false);
}

void check_identity(const nlohmann::json& saved, const nlohmann::json& current, const std::string& where) {
  std::vector<std::string> diffs;
  auto cmp = [&](const std::string& name, const nlohmann::json& a, const nlohmann::json& b) {
    if (a != b) diffs.push_back(name + ": checkpoint " + a.dump() + ", now " + b.dump());
  };
  for (const char* k : {"model", "data"})
    cmp(k, saved.value(k, nlohmann::json()), current.value(k, nlohmann::json()));
  const nlohmann::json sc = saved.value("config", nlohmann::json::object());
  const nlohmann::json cc = current.value("config", nlohmann::json::object());
  for (auto it = cc.begin(); it != cc.end(); ++it) cmp("--" + it.key(), sc.value(it.key(), nlohmann::json()), it.value());
  for (auto it = sc.begin(); it != sc.end(); ++it)
    if (!cc.contains(it.key())) cmp("--" + it.key(), it.value(), nlohmann::json());
  if (diffs.empty()) return;
  std::string what = "this checkpoint belongs to a different run, so it cannot be resumed:";
  for (const auto& d : diffs) what += "\n  " + d;
  fail(where, what,
       "re-run with the original model, data and options to continue it, or give a new --out folder to start a "
       "new run");
}

}  // namespace nl
