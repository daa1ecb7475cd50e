#include "capture/rows_progress.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "capture/capture_run.h"

using namespace flipscope;

namespace {
Log Collecting(std::vector<std::string>* lines) {
  return {[lines](std::string_view l) { lines->emplace_back(l); }, true};
}
}  // namespace

// Served replay feeds p alone where the model wrote p and p + 1: here 1-2 and 5-7 were written,
// so positions 1, 5 and 6 are decode steps; the end line gives their count and rate.
TEST(RowsProgress, ServedReplayCountsDecodeStepsAndForks) {
  const std::vector<uint8_t> written = {0, 1, 1, 0, 0, 1, 1, 1, 0, 0};
  EXPECT_EQ(ServedDecodeSteps(written, 10), 3);
  std::vector<std::string> lines;
  testing::internal::CaptureStderr();  // not a terminal: lines only
  {
    RowsProgress p(Collecting(&lines), 10, written, 0);
    EXPECT_EQ(p.DecodeSteps(), 3);
    p.Tokens(6);
    p.Forked(0.3);
    p.Finish(true, 1.5);
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "served replay: started, 10 tok");
  EXPECT_TRUE(std::regex_match(lines[1], std::regex(R"(served replay: 10 tok in [0-9.]+ s \([0-9.]+ tok/s\), )"
                                                    R"(3 decode steps in 1\.5 s \(2\.0 steps/s\), )"
                                                    R"(1 fork decoded in 0\.3 s)")))
      << lines[1];
}

// The exact engine's token counts stand for its layers; a prefill has no note; a capture that
// failed says where it stopped.
TEST(RowsProgress, ExactSaysItsLayersAndAFailureWhereItStopped) {
  std::vector<std::string> lines;
  testing::internal::CaptureStderr();  // not a terminal: lines only
  {
    RowsProgress p(Collecting(&lines), 300, {}, 2);
    p.Tokens(100);  // layer 1 of 2 done: 300 * 1 / 3
    p.Finish(true, std::nullopt);
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "exact (FP64): started, 300 tok");
  EXPECT_NE(lines[1].find("300 tok in "), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find(", 2 layers"), std::string::npos) << lines[1];
  lines.clear();
  {
    RowsProgress p(Collecting(&lines), 50, {}, 0);
    p.Tokens(20);
    p.Finish(false, std::nullopt);
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "prefill: started, 50 tok");
  EXPECT_EQ(lines[1].rfind("prefill: stopped at 20 of 50 tok in ", 0), 0u) << lines[1];
}
