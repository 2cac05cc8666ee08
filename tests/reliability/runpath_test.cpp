// The shipped binaries' RUNPATH (docs/reliability.md, trust model): the executable, the libmme_* libraries and
// every plugin of the staged install tree carry only $ORIGIN-relative entries, and no empty one
// (an empty entry makes the dynamic loader search the current folder for libraries: the bug
// fixed in 511d4e5, where CMake's build rpath came out as '$ORIGIN/../lib:' and '::::').
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include <elf.h>

namespace mme {
namespace {

namespace fs = std::filesystem;

struct DynamicPaths {
  std::optional<std::string> runpath, rpath;  // DT_RUNPATH, DT_RPATH
};

// Reads DT_RUNPATH and DT_RPATH of a 64-bit little-endian ELF file from its section headers.
DynamicPaths read_dynamic_paths(const fs::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  std::string bytes(static_cast<std::size_t>(std::max<std::streamoff>(in.tellg(), 0)), '\0');
  in.seekg(0).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));  // one read: fast in debug builds
  if (bytes.size() < sizeof(Elf64_Ehdr) || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0 ||
      bytes[EI_CLASS] != ELFCLASS64)
    throw std::runtime_error(file.string() + ": not a 64-bit ELF file");
  auto at = [&](std::size_t off, std::size_t len) {
    if (off > bytes.size() || len > bytes.size() - off) throw std::runtime_error(file.string() + ": truncated");
    return bytes.data() + off;
  };
  Elf64_Ehdr eh;
  std::memcpy(&eh, at(0, sizeof eh), sizeof eh);
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  for (std::size_t i = 0; i < sections.size(); ++i)
    std::memcpy(&sections[i], at(eh.e_shoff + i * eh.e_shentsize, sizeof(Elf64_Shdr)), sizeof(Elf64_Shdr));
  DynamicPaths out;
  for (const auto& sh : sections) {
    if (sh.sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr& strtab = sections.at(sh.sh_link);
    for (std::size_t off = 0; off + sizeof(Elf64_Dyn) <= sh.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      std::memcpy(&d, at(sh.sh_offset + off, sizeof d), sizeof d);
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag != DT_RUNPATH && d.d_tag != DT_RPATH) continue;
      const char* s = at(strtab.sh_offset + d.d_un.d_val, 1);
      (d.d_tag == DT_RUNPATH ? out.runpath : out.rpath) = std::string(s);
    }
  }
  return out;
}

std::vector<fs::path> shipped_binaries() {
  std::vector<fs::path> out{test::mme_exe()};
  for (const auto& e : fs::directory_iterator(test::stage_dir() / "lib"))
    if (e.is_regular_file() && e.path().filename().string().rfind("libmme_", 0) == 0) out.push_back(e.path());
  for (const auto& e : fs::directory_iterator(test::plugin_dir()))
    if (e.is_regular_file() && e.path().extension() == ".so") out.push_back(e.path());
  return out;
}

TEST(Runpath, ShippedBinariesHaveNoEmptyOrRelativeEntries) {
  const auto files = shipped_binaries();
  // mme, the six framework libraries (framework/CMakeLists.txt) and at least one plugin.
  ASSERT_GE(files.size(), 8u) << "mme, the libmme_* libraries and at least one plugin";
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const DynamicPaths p = read_dynamic_paths(f);
    EXPECT_FALSE(p.rpath) << "DT_RPATH (searched before LD_LIBRARY_PATH): " << *p.rpath;
    if (!p.runpath) continue;
    std::string entry;
    std::stringstream entries(*p.runpath);
    int n = 0;
    while (std::getline(entries, entry, ':')) {
      ++n;
      EXPECT_FALSE(entry.empty()) << "an empty entry (the current folder) in '" << *p.runpath << "'";
      EXPECT_EQ(entry.rfind("$ORIGIN", 0), 0u) << "an entry not relative to the binary: '" << entry << "'";
    }
    EXPECT_FALSE(!p.runpath->empty() && p.runpath->back() == ':') << "a trailing ':' in '" << *p.runpath << "'";
    EXPECT_GE(n, 1);
  }
}

TEST(Runpath, ExpectedEntries) {
  EXPECT_EQ(read_dynamic_paths(test::mme_exe()).runpath.value_or("(none)"), "$ORIGIN/../lib");
  int libraries = 0;
  for (const auto& e : fs::directory_iterator(test::stage_dir() / "lib")) {
    if (e.is_symlink() || !e.is_regular_file() || e.path().filename().string().rfind("libmme_", 0) != 0) continue;
    ++libraries;  // a framework library finds the others beside it
    EXPECT_EQ(read_dynamic_paths(e.path()).runpath.value_or("(none)"), "$ORIGIN") << e.path();
  }
  EXPECT_EQ(libraries, 8);  // the seven framework libraries and the C entry point, libmme_c (capi/)
  for (const auto& e : fs::directory_iterator(test::plugin_dir())) {
    if (e.path().extension() != ".so") continue;
    EXPECT_EQ(read_dynamic_paths(e.path()).runpath.value_or("(none)"), "$ORIGIN/../..") << e.path();
  }
}

// The reader itself: the test program links libmme from the build tree, so CMake gave it a
// build RUNPATH (not shipped) that names libmme's folder; a file that is not ELF is refused.
TEST(Runpath, ReaderSeesWhatTheLinkerWrote) {
  const DynamicPaths self = read_dynamic_paths("/proc/self/exe");
  ASSERT_TRUE(self.runpath.has_value());
  EXPECT_FALSE(self.runpath->empty());
  EXPECT_THROW(read_dynamic_paths(test::source_dir() / "README.md"), std::runtime_error);
}

}  // namespace
}  // namespace mme
