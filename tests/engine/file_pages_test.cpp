// What the cpu engine does with the model file's pages once it has tiled the matrices
// (release_file_pages, src/engine/backends.h): it drops them from the process, so the weights
// are resident once, and leaves them in the page cache, so the next command that loads the
// model reads them from there instead of from storage.
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/util/file_map.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// Pages of the file in the page cache, out of its pages (mincore on a mapping of our own).
std::pair<size_t, size_t> cached_pages(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  const size_t size = fs::file_size(file), page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  EXPECT_NE(p, MAP_FAILED);
  std::vector<unsigned char> in((size + page - 1) / page);
  EXPECT_EQ(::mincore(p, size, in.data()), 0);
  ::munmap(p, size);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return {n, in.size()};
}

// The process's resident kB of the mapping that holds p (/proc/self/smaps), -1 if none.
long resident_kb_of_mapping(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t b = 0, e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &b, &e) == 2) {  // a mapping's first line (fields: "Rss: ...")
      inside = a >= b && a < e;
      continue;
    }
    long kb = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

TEST(FileMap, KnowsItsOwnMappingsOnly) {
  nltest::TempDir dir;
  const fs::path f = dir / "bytes";
  { std::ofstream(f, std::ios::binary) << std::string(10000, 'x'); }
  std::vector<uint8_t> heap(100);
  EXPECT_FALSE(nl::FileMap::maps(heap.data(), heap.size()));
  const uint8_t* data = nullptr;
  {
    nl::FileMap m(f.string());
    data = m.data();
#if !NL_FILEMAP_HEAP
    EXPECT_TRUE(nl::FileMap::maps(m.data(), m.size()));
    EXPECT_TRUE(nl::FileMap::maps(m.data() + 100, 200));
    EXPECT_FALSE(nl::FileMap::maps(m.data() + 100, m.size())) << "past the end";
    nl::FileMap moved(std::move(m));
    EXPECT_TRUE(nl::FileMap::maps(moved.data(), moved.size()));
#endif
  }
  EXPECT_FALSE(nl::FileMap::maps(data, 1)) << "unmapped with its FileMap";
}

TEST(FilePages, TiledWeightsLeaveTheProcessButStayInThePageCache) {
  nltest::TempDir dir;
  const fs::path path = dir / "m.gguf";
  nl::SynthOptions so;
  so.preset = "tiny-llama-k";
  so.type = nl::QType::Q4_0;
  so.tokenizer = "generated";
  nl::synth_model(path.string(), so);
  auto model = nl::Model::load(path.string());
  // Every matrix's pages read into the process first (as a backend that had not tiled them
  // would have them); the embedding and the metadata are most of what stays.
  std::vector<const nl::TensorView*> mats = {&model->weights.output, &model->weights.tok_embd};
  for (const nl::LayerWeights& l : model->weights.layers)
    for (int p = 0; p < nl::kNumProj; ++p) mats.push_back(&l.proj(static_cast<nl::Proj>(p)));
  volatile uint8_t sink = 0;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const nl::TensorView* m : mats)
    for (size_t o = 0; o < m->nbytes; o += static_cast<size_t>(page)) sink = sink + m->data[o];
  const nl::TensorView& w = model->weights.layers[0].w_gate;
  const long before = resident_kb_of_mapping(w.data);
  ASSERT_GT(before, 0) << "the mapping's pages should be resident after reading them";
  auto engine = nl::make_engine(*model, {"cpu", 2});
  const long after = resident_kb_of_mapping(w.data);
  const auto [cached, pages] = cached_pages(path);
  std::printf("[file pages] mapping resident %ld kB -> %ld kB after tiling; file pages cached %zu of %zu\n", before,
              after, cached, pages);
  EXPECT_LT(after, before / 4) << "the tiled matrices' file pages should leave the process";
  EXPECT_GE(cached * 10, pages * 9) << "the file should stay in the page cache for the next load";
}

}  // namespace
