// The main of every stage's test executable. The tests of a stage's files share one executable
// (fewer links); `--gtest_filter=file:PATH[,PATH...]` selects the tests defined in those source
// files (PATH: the file's path or its trailing part, e.g. `file:report_test.cpp`), which is how
// each flipscope_test(NAME ...) keeps its own ctest labels (CMakeLists.txt). Any other filter is
// GoogleTest's own.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace {

// True when `file` is `path` or ends with "/" + `path`.
bool SameFile(std::string_view file, std::string_view path) {
  if (path.empty() || file.size() < path.size() || file.substr(file.size() - path.size()) != path) return false;
  return file.size() == path.size() || file[file.size() - path.size() - 1] == '/';
}

// The full names of the registered tests defined in one of `paths` (comma-separated), as a
// GoogleTest filter; "-*" (nothing) when there are none.
std::string FilterOfFiles(std::string_view paths) {
  std::vector<std::string_view> wanted;
  for (size_t start = 0; start <= paths.size();) {
    size_t end = paths.find(',', start);
    if (end == std::string_view::npos) end = paths.size();
    wanted.push_back(paths.substr(start, end - start));
    start = end + 1;
  }
  std::string filter;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const ::testing::TestInfo& test = *suite.GetTestInfo(t);
      for (std::string_view path : wanted) {
        if (!SameFile(test.file(), path)) continue;
        if (!filter.empty()) filter += ':';
        filter += std::string(test.test_suite_name()) + "." + test.name();
        break;
      }
    }
  }
  return filter.empty() ? "-*" : filter;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string filter = GTEST_FLAG_GET(filter);
  constexpr std::string_view kFiles = "file:";
  if (filter.compare(0, kFiles.size(), kFiles) == 0)
    GTEST_FLAG_SET(filter, FilterOfFiles(std::string_view(filter).substr(kFiles.size())));
  return RUN_ALL_TESTS();
}
