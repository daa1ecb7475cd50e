// Small chat workloads shared by tests of the served replay (capture and experiment stages).
#pragma once

namespace flipscope::fixtures {

// system, user, an assistant turn with a tool call, its result, a closing assistant turn, a user
// follow-up and the answer: three runs the model wrote, between text it read.
inline constexpr const char* kToolChat = R"({"messages": [
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Port of db1?"},
  {"role": "assistant", "content": "Checking.", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "check_port", "arguments": {"host": "db1"}}}]},
  {"role": "tool", "tool_call_id": "c1", "content": "5432 open"},
  {"role": "assistant", "content": "It is 5432."},
  {"role": "user", "content": "Thanks."},
  {"role": "assistant", "content": "Welcome."}]})";

}  // namespace flipscope::fixtures
