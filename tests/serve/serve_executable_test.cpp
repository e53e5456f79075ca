// `nightlora serve` is the executable nightlora-serve, which nightlora execs (cli/cmd_serve.cpp,
// cli/command_program.h): nightlora itself must not load the HTTP stack (the ELF files'
// DT_NEEDED lists say what the loader maps at start), and the user's side of the command
// must be unchanged: its help and "did you mean" through nightlora, the server in the
// process nightlora was started as (its pid, its signals, its exit status), and a clear
// error that says where it looked when nightlora-serve is missing.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "serve_process.h"

namespace {

using namespace nltest;

// The DT_NEEDED entries of a 64-bit little-endian ELF file: the shared libraries the loader
// maps before main (it maps theirs too). Read through the program headers (what the loader
// reads), so a stripped file works too. Fails the test, returning {}, on a file it cannot read.
std::vector<std::string> elf_needed_libraries(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Elf64_Ehdr eh{};
  if (bytes.size() < sizeof eh || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0 ||
      bytes[EI_CLASS] != ELFCLASS64) {
    ADD_FAILURE() << file << " is not a 64-bit ELF file";
    return {};
  }
  std::memcpy(&eh, bytes.data(), sizeof eh);
  auto header = [&](int i) {
    Elf64_Phdr ph{};
    const size_t at = eh.e_phoff + static_cast<size_t>(i) * eh.e_phentsize;
    if (at + sizeof ph <= bytes.size()) std::memcpy(&ph, bytes.data() + at, sizeof ph);
    return ph;
  };
  // A virtual address in a loaded segment as a file offset (the string table is given by address).
  auto offset_of = [&](uint64_t vaddr) -> size_t {
    for (int i = 0; i < eh.e_phnum; ++i) {
      const Elf64_Phdr ph = header(i);
      if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
        return static_cast<size_t>(vaddr - ph.p_vaddr + ph.p_offset);
    }
    return bytes.size();
  };
  std::vector<Elf64_Dyn> dynamic;
  for (int i = 0; i < eh.e_phnum; ++i) {
    const Elf64_Phdr ph = header(i);
    if (ph.p_type != PT_DYNAMIC) continue;
    for (size_t at = ph.p_offset; at + sizeof(Elf64_Dyn) <= std::min<size_t>(ph.p_offset + ph.p_filesz, bytes.size());
         at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d{};
      std::memcpy(&d, bytes.data() + at, sizeof d);
      if (d.d_tag == DT_NULL) break;
      dynamic.push_back(d);
    }
  }
  size_t strtab = bytes.size();
  for (const Elf64_Dyn& d : dynamic)
    if (d.d_tag == DT_STRTAB) strtab = offset_of(d.d_un.d_ptr);
  std::vector<std::string> needed;
  for (const Elf64_Dyn& d : dynamic)
    if (d.d_tag == DT_NEEDED && strtab + d.d_un.d_val < bytes.size())
      needed.emplace_back(bytes.c_str() + strtab + d.d_un.d_val);
  return needed;
}

bool needs_library(const std::vector<std::string>& needed, const std::string& prefix) {
  for (const std::string& n : needed)
    if (n.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string joined_names(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : " ") + n;
  return s;
}

TEST(ServeExecutable, OnlyTheServerLoadsTheHttpStack) {
  const std::vector<std::string> cli = elf_needed_libraries(NL_CLI_PATH);
  const std::vector<std::string> server = elf_needed_libraries(NL_SERVE_PATH);
  ASSERT_FALSE(cli.empty()) << NL_CLI_PATH;
  ASSERT_TRUE(needs_library(cli, "libc.so")) << joined_names(cli);  // the reader reads what it should
  for (const char* http : {"libcpp-httplib", "libssl", "libcrypto", "libz.", "libbrotli"})
    EXPECT_FALSE(needs_library(cli, http)) << "nightlora loads " << http << ": " << joined_names(cli);
  EXPECT_TRUE(needs_library(server, "libcpp-httplib")) << joined_names(server);
}

TEST(ServeExecutable, HelpAndMistakesAreTheServers) {
  CmdResult help = run_cli("--help");
  EXPECT_EQ(help.rc, 0) << help.err;
  EXPECT_NE(help.out.find("serve  "), std::string::npos) << help.out;  // listed among the commands
  EXPECT_NE(help.out.find("OpenAI API"), std::string::npos) << help.out;
  CmdResult serve_help = run_cli("serve --help");
  EXPECT_EQ(serve_help.rc, 0) << serve_help.err;
  for (const char* line : {"Usage: nightlora serve [OPTIONS]", "--model", "--api-key", "--max-concurrent", "--kv-type"})
    EXPECT_NE(serve_help.out.find(line), std::string::npos) << line << " missing from:\n" << serve_help.out;
  CmdResult typo = run_cli("serve --model m.gguf --prot 8080");
  EXPECT_EQ(typo.rc, 1) << typo.out;
  EXPECT_NE(typo.err.find("nightlora serve: unknown option --prot. Did you mean '--port'?"), std::string::npos) << typo.err;
  CmdResult range = run_cli("serve --model m.gguf --port 70000");
  EXPECT_EQ(range.rc, 1);
  EXPECT_NE(range.err.find("70000 not in range"), std::string::npos) << range.err;
}

TEST(ServeExecutable, MissingServerSaysWhereItLookedAndWhatToDo) {
  TempDir tmp;
  fs::create_directories(tmp / "alone");
  fs::create_directories(tmp / "bin");
  const fs::path lone = tmp / "alone/nightlora";  // a copy: /proc/self/exe of a symlink is its target
  fs::copy_file(NL_CLI_PATH, lone);
  CmdResult missing = run_cmd("PATH=" + shq((tmp / "bin").string()) + " " + shq(lone.string()) + " serve --help");
  EXPECT_EQ(missing.rc, 1) << missing.out;
  EXPECT_EQ(missing.out, "");
  for (const std::string& part : {std::string("nightlora serve: needs the executable nightlora-serve"),
                                  (tmp / "alone").string() + " (beside this nightlora)",
                                  "on PATH (" + (tmp / "bin").string() + ")", std::string("libcpp-httplib-dev")})
    EXPECT_NE(missing.err.find(part), std::string::npos) << part << " missing from:\n" << missing.err;
  // Not beside it, but on PATH: found there.
  fs::create_symlink(NL_SERVE_PATH, tmp / "bin/nightlora-serve");
  CmdResult on_path = run_cmd("PATH=" + shq((tmp / "bin").string()) + " " + shq(lone.string()) + " serve --help");
  EXPECT_EQ(on_path.rc, 0) << on_path.err;
  EXPECT_NE(on_path.out.find("--max-concurrent"), std::string::npos) << on_path.out;
}

TEST(ServeExecutable, TheServerIsTheProcessNightloraStartedAs) {
  if (const char* s = std::getenv("NL_SERVE_CLI"); s && *s) GTEST_SKIP() << "NL_SERVE_CLI runs a server directly";
  TempDir tmp;
  ServeProcess server({"--model", serve_test_model(tmp.path).string(), "--data", (tmp / "data").string()},
                      tmp / "serve.log");
  ASSERT_TRUE(server.started());
  // execv: the pid nightlora was started as now runs nightlora-serve (no child in between).
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/" + std::to_string(server.pid()) + "/exe", ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(exe.filename(), "nightlora-serve") << exe;
  // SIGTERM to that pid reaches the server's own handling: it stops cleanly, exit status 0.
  EXPECT_EQ(server.terminate(), 0) << server.log();
  EXPECT_NE(server.log().find("serve: stopped"), std::string::npos) << server.log();
}

}  // namespace
