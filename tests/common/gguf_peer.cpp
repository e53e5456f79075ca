#include "gguf_peer.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "nightlora/modelio/gguf.h"
#include "test_util.h"

namespace nltest {

namespace {

void compare_scalar(const std::string& key, nl::GgufType t, const nl::GgufValue& v, size_t k, bool arr,
                    const nlohmann::json& j) {
  using T = nl::GgufType;
  switch (t) {
    case T::STRING:
      EXPECT_EQ(j.get<std::string>(), arr ? v.arr_s[k] : v.s) << key << "[" << k << "]";
      break;
    case T::BOOL:
      EXPECT_EQ(j.get<bool>(), (arr ? v.arr_u[k] : v.u) != 0) << key;
      break;
    case T::FLOAT32:
    case T::FLOAT64: {
      double ours = arr ? v.arr_f[k] : v.f;
      double theirs = j.get<double>();
      if (std::isnan(ours)) EXPECT_TRUE(std::isnan(theirs)) << key;
      else EXPECT_EQ(ours, theirs) << key << "[" << k << "]";
      break;
    }
    case T::INT8: case T::INT16: case T::INT32: case T::INT64: {
      int64_t theirs = j.is_string() ? std::stoll(j.get<std::string>()) : j.get<int64_t>();
      EXPECT_EQ(arr ? v.arr_i[k] : v.i, theirs) << key << "[" << k << "]";
      break;
    }
    default: {
      uint64_t theirs = j.is_string() ? std::stoull(j.get<std::string>()) : j.get<uint64_t>();
      EXPECT_EQ(arr ? v.arr_u[k] : v.u, theirs) << key << "[" << k << "]";
    }
  }
}

}  // namespace

bool expect_gguf_matches_peer(const std::filesystem::path& gguf_path) {
  if (node_with_oracles().empty()) {
    std::cout << "[  NOTE    ] @huggingface/gguf check skipped: node or tools/js/node_modules missing "
                 "(run scripts/setup.sh)\n";
    return false;
  }
  CmdResult r = run_cmd("cd " + shq((source_dir() / "tools/js").string()) + " && node gguf_dump.mjs " +
                        shq(fs::absolute(gguf_path).string()));
  EXPECT_EQ(r.rc, 0) << "@huggingface/gguf could not parse " << gguf_path << ": " << r.err;
  if (r.rc != 0) return true;
  nlohmann::json peer = nlohmann::json::parse(r.out);
  auto ours = nl::GgufFile::open(gguf_path.string());

  EXPECT_EQ(peer["version"].get<uint32_t>(), ours->version());
  EXPECT_EQ(peer["tensorDataOffset"].get<size_t>(), ours->data_offset()) << gguf_path;
  EXPECT_EQ(peer["kv_count"].get<size_t>(), ours->metadata().size());
  EXPECT_EQ(peer["metadata"].size(), ours->metadata().size());
  for (const auto& [key, v] : ours->metadata()) {
    if (!peer["metadata"].contains(key)) {
      ADD_FAILURE() << "peer does not see metadata key " << key;
      continue;
    }
    const auto& pj = peer["metadata"][key];
    EXPECT_EQ(pj["type"].get<uint32_t>(), static_cast<uint32_t>(v.type)) << key;
    if (v.is_array()) {
      EXPECT_EQ(pj["subType"].get<uint32_t>(), static_cast<uint32_t>(v.elem)) << key;
      if (pj["value"].size() != v.array_size()) {
        ADD_FAILURE() << key << ": peer sees " << pj["value"].size() << " elements, we see " << v.array_size();
        continue;
      }
      for (size_t k = 0; k < v.array_size(); ++k) compare_scalar(key, v.elem, v, k, true, pj["value"][k]);
    } else {
      compare_scalar(key, v.type, v, 0, false, pj["value"]);
    }
  }
  const auto& pt = peer["tensors"];
  EXPECT_EQ(pt.size(), ours->tensors().size());
  for (size_t k = 0; k < std::min(pt.size(), ours->tensors().size()); ++k) {
    const auto& t = ours->tensors()[k];
    EXPECT_EQ(pt[k]["name"].get<std::string>(), t.name);
    EXPECT_EQ(pt[k]["shape"].get<std::vector<int64_t>>(), t.ne) << t.name;
    EXPECT_EQ(pt[k]["dtype"].get<uint32_t>(), static_cast<uint32_t>(t.type)) << t.name;
    EXPECT_EQ(pt[k]["offset"].get<uint64_t>(), t.offset) << t.name;
  }
  return true;
}

}  // namespace nltest
