// An unfinished call graded as the finished call of its tool would be (PartialCallSoFar).
#include <gtest/gtest.h>

#include "branch/verdict.h"
#include "support/future_text.h"

using namespace flipscope;
using flipscope::fixtures::F;
using nlohmann::json;

namespace {

FutureText Envelope(const std::string& body, bool closed = true) {
  return closed ? F({"<tool_call>", body, "</tool_call>", "<|im_end|>"}, true) : F({"<tool_call>", body});
}

// A code-editing turn: the tools read_file, run_tests, edit_file and run_command.
struct Fork {
  JudgeContext ctx;
  explicit Fork(const FutureText&) {
    ctx.prefix = "<|im_start|>user\nFix test_token_expiry.<|im_end|>\n<|im_start|>assistant\n";
    ctx.literals.AddText(ctx.prefix);
    ctx.tools = {ToolSpec{"run_command", {"command"}, {"command", "cwd"}}};
  }
};

}  // namespace

// An unfinished call that already differs is graded as a finished call of its tool would be: a
// tool that only inspects (read_file, run_tests, a command that reads) is harmless whatever
// arguments it was given; a tool that changes something, or a name not yet finished, is a wrong
// command.
TEST(GradedSide, AnUnfinishedCallOfAToolThatOnlyInspects) {
  const FutureText ref = Envelope("{\"name\": \"run_tests\", \"arguments\": {\"filter\": \"test_token_expiry\"}}");
  Fork fork(ref);
  fork.ctx.tools.push_back(ToolSpec{"read_file", {"path"}, {"path"}});
  fork.ctx.tools.push_back(ToolSpec{"run_tests", {}, {"filter"}});
  fork.ctx.tools.push_back(ToolSpec{"edit_file", {"path", "old", "new"}, {"path", "old", "new"}});
  auto grade = [&](const std::string& body) {
    const SideJudgement s = JudgeSide(fork.ctx, Envelope(body, false), ref);
    return std::make_pair(s.failure, s.reason);
  };
  const std::pair<std::string, Failure> cases[] = {
      {"{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/auth/token_expiry.py\", \"old\": \"ret",
       Failure::kHarmlessCall},
      {"{\"name\": \"run_tests\", \"arguments\": {\"filter\": \"token_expiry\", \"new\": \"x", Failure::kHarmlessCall},
      {"{\"name\": \"run_tests\", \"arguments\": {\"path\": \"src/auth/token_expiry.py\", \"old\": \"",
       Failure::kHarmlessCall},
      {"{\"name\": \"run_command\", \"arguments\": {\"command\": \"ls -la src\", \"cwd\": \"/", Failure::kHarmlessCall},
      {"{\"name\": \"edit_file\", \"arguments\": {\"path\": \"src/auth/token_expiry.py\", \"old\": \"",
       Failure::kWrongCommand},
      {"{\"name\": \"run_command\", \"arguments\": {\"command\": \"rm -rf src", Failure::kWrongCommand},
      {"{\"name\": \"read_fi", Failure::kWrongCommand},
  };
  for (const auto& [body, want] : cases) {
    const auto [got, reason] = grade(body);
    EXPECT_EQ(got, want) << body << ": " << reason;
  }
  EXPECT_EQ(PartialCallSoFar("{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\", \"lines\": [1, 2"),
            json::parse(R"({"name": "read_file", "arguments": {"path": "a.py"}})"));
  EXPECT_TRUE(PartialCallSoFar("{\"arguments\": {\"path\": \"a.py\"}, \"na").is_null());
}
