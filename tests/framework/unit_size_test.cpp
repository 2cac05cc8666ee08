// Short units (issue 15): no function in framework/, plugins/ or cli/ over 200 lines and no
// source file over 900. A unit that must stay over a limit for a while is listed below with
// its current size: it may shrink but never grow, and one that comes under the limit must leave
// the list, so the list only gets shorter. Today the lists are empty.
#include "unit_size.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace mme::test {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxFileLines = 900;
constexpr std::size_t kMaxFunctionLines = 200;

// Files over kMaxFileLines: path relative to the source tree -> lines today.
const std::map<std::string, std::size_t> kLongFiles = {};

// Functions over kMaxFunctionLines: "path: head" -> lines today.
const std::map<std::string, std::size_t> kLongFunctions = {};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t line_count(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) +
         (!text.empty() && text.back() != '\n' ? 1 : 0);
}

TEST(UnitSize, TheScannerFindsFunctionBodiesAndNothingElse) {
  const std::string sample =
      "#include <x>\n"                         // 1
      "namespace a {\n"                        // 2
      "const int kTable[] = {1, 2, 3};\n"      // 3
      "struct S {\n"                           // 4
      "  int f() const { return 1; }\n"        // 5
      "};\n"                                   // 6
      "// a comment with { braces\n"           // 7
      "int g(int x) {\n"                       // 8
      "  const char* s = \"}{\";\n"            // 9
      "  auto l = [](int y) { return y; };\n"  // 10
      "  if (x) { return l(x); }\n"            // 11
      "  /* } */ return R\"({)\" [0];\n"       // 12
      "}\n"                                    // 13
      "}  // namespace a\n";                   // 14
  const auto spans = function_spans(sample);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].first_line, 5u);
  EXPECT_EQ(spans[0].lines(), 1u);
  EXPECT_EQ(spans[1].head, "int g(int x)");
  EXPECT_EQ(spans[1].first_line, 8u);
  EXPECT_EQ(spans[1].last_line, 13u);
}

TEST(UnitSize, NoLongFilesOrFunctionsBeyondTheListedOnes) {
  std::size_t files = 0, functions = 0;
  std::map<std::string, std::size_t> long_files, long_functions;
  for (const char* root : {"framework", "plugins", "cli"}) {
    for (const auto& e : fs::recursive_directory_iterator(source_dir() / root)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
      const std::string rel = fs::relative(e.path(), source_dir()).generic_string();
      const std::string text = read(e.path());
      ++files;
      if (const std::size_t n = line_count(text); n > kMaxFileLines) long_files[rel] = n;
      for (const auto& f : function_spans(text)) {
        ++functions;
        if (f.lines() > kMaxFunctionLines) long_functions[rel + ": " + f.head.substr(0, 80)] = f.lines();
      }
    }
  }
  EXPECT_GT(files, 50u);
  EXPECT_GT(functions, 500u);
  auto check = [](const std::map<std::string, std::size_t>& found, const std::map<std::string, std::size_t>& listed,
                  std::size_t limit, const char* what) {
    for (const auto& [unit, n] : found) {
      const auto it = listed.find(unit);
      if (it == listed.end())
        ADD_FAILURE() << what << " over " << limit << " lines: " << unit << " (" << n << ")";
      else
        EXPECT_LE(n, it->second) << unit << " grew; it is over the limit of " << limit;
    }
    for (const auto& [unit, n] : listed)
      EXPECT_TRUE(found.count(unit)) << unit << " is no longer over " << limit << " lines: remove it from the list";
  };
  check(long_files, kLongFiles, kMaxFileLines, "file");
  check(long_functions, kLongFunctions, kMaxFunctionLines, "function");
}

}  // namespace
}  // namespace mme::test
