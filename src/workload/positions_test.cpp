#include <gtest/gtest.h>

#include "workload/workload.h"

namespace flipscope {
namespace {

std::vector<Span> OneCall() {  // a tool call over tokens [10, 14): predicted from positions 9..12
  return {{SpanKind::kMessage, 0, 20, 1, "assistant", "message #1 assistant", ""},
          {SpanKind::kToolCall, 10, 14, 1, "assistant", "tool call #1 ping", "ping"}};
}

TEST(SelectPositions, RangesAndToolCallsSortedUniqueAndClippedToTheLastScoredPosition) {
  auto r = SelectPositions("11-12,tool_calls,2-3,17-40", 18, OneCall(), "full");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, (std::vector<int32_t>{2, 3, 9, 10, 11, 12, 17, 18}));
  auto empty = SelectPositions(",,", 18, OneCall(), "full");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(SelectPositions, ErrorsNameTheFieldAndTheItem) {
  for (const char* bad : {"9-3", "a-b", "3-", "-3", " 3-5", "3-5x", "3", "tool_call"}) {
    auto r = SelectPositions(bad, 18, OneCall(), "ranges");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              std::string("ranges: '") + bad + "' is not tool_calls or a range A-B (0 <= A <= B)");
  }
  auto past = SelectPositions("19-25", 18, OneCall(), "full");
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().message(), "full: range 19-25 starts past the workload's last scored position 18");
  EXPECT_TRUE(SelectPositions("18-25", 18, OneCall(), "full").ok());
}

}  // namespace
}  // namespace flipscope
