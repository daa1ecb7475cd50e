// Test helper (tests/support): the judge's context at a network-automation session's branch point,
// for the verdict tests: the tools, and a prefix whose literals the user names.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "branch/verdict.h"

namespace flipscope::fixtures {

inline const char* kTools = R"([
  {"type": "function", "function": {"name": "run_command", "description": "Run a CLI command on a device",
   "parameters": {"type": "object", "properties": {"device": {"type": "string"}, "command": {"type": "string"}},
                  "required": ["device", "command"]}}},
  {"type": "function", "function": {"name": "check_port", "parameters": {"type": "object",
   "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}, "required": ["host", "port"]}}}
])";

// A session prefix: the user names the literals; the assistant is about to answer or call a tool.
inline JudgeContext Context(std::string prefix) {
  JudgeContext ctx;
  ctx.prefix = std::move(prefix);
  ctx.literals.AddText(ctx.prefix);
  ctx.tools = *ParseToolSpecs(nlohmann::json::parse(kTools));
  return ctx;
}

inline const std::string kSession =
    "<|im_start|>user\nThe database on db01.lab.example.net (10.20.30.4) listens on port 5432. Check the "
    "subinterface GigabitEthernet0/0/1.201 on core-sw1 (mac 00:1a:2b:3c:4d:5e) and the uplink "
    "GigabitEthernet0/1/4.<|im_end|>\n<|im_start|>assistant\n";

}  // namespace flipscope::fixtures
