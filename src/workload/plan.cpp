// The rendering plan: the documented fallbacks for templates that cannot render tools.
#include <fmt/format.h>

#include "workload/internal.h"

namespace flipscope::workload {
namespace {

// The plain form in which tools are listed when the template cannot render tool definitions
// (the widespread Hermes/Qwen wording), appended to the system message.
std::string ToolListing(const OrderedJson& tools) {
  std::string s =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const auto& t : tools) s += "\n" + DumpSpaced(t);
  return s +
         "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
         "<tool_call></tool_call> XML tags:\n<tool_call>{\"name\": <function-name>, \"arguments\": "
         "<args-json-object>}</tool_call>";
}

std::string CallText(const ToolCall& c) {
  return "<tool_call>" + DumpSpaced(OrderedJson{{"name", c.name}, {"arguments", c.arguments}}) + "</tool_call>";
}

// Message m as it will be rendered: its tool calls rendered by the template or written into the
// content, a tool result in a tool message or a user one, the tools listed in it when list_tools.
Planned PlanMessage(const Message& m, const ChatTemplate& tmpl, const OrderedJson& tools, bool list_tools) {
  Planned p;
  p.origins = {m.index};
  p.msg.role = m.role;
  p.msg.content = m.content;
  p.label = fmt::format("message #{} {}", m.index, m.role);
  if (list_tools) p.msg.content += (p.msg.content.empty() ? "" : "\n\n") + ToolListing(tools);
  for (const ToolCall& c : m.calls) {
    if (tmpl.supports_tool_calls) {
      p.msg.calls.push_back(&c);
      p.marks.push_back({SpanKind::kToolCall, "", c.index, c.name});
    } else {
      std::string text = CallText(c);
      p.msg.content += (p.msg.content.empty() ? "" : "\n") + text;
      p.marks.push_back({SpanKind::kToolCall, text, c.index, c.name});
    }
  }
  if (m.role == "tool") {
    if (tmpl.tool_role) {
      p.msg.tool_call_id = m.tool_call_id;
      p.msg.tool_name = m.tool_name;
    } else {
      p.msg.role = "user";
      p.msg.content = "<tool_response>" + m.content + "</tool_response>";
      p.label += " (as user)";
    }
    p.marks.push_back({SpanKind::kToolResult, p.msg.content, m.answers_call, m.tool_name});
  }
  return p;
}

// Merges consecutive messages of one role (tool messages apart) into one, for a template that
// alternates roles; returns how many were merged into another.
int MergeSameRole(std::vector<Planned>* plan) {
  int merged = 0;
  std::vector<Planned> m;
  for (auto& p : *plan) {
    if (!m.empty() && m.back().msg.role == p.msg.role && p.msg.role != "tool") {
      Planned& b = m.back();
      b.msg.content += (b.msg.content.empty() || p.msg.content.empty() ? "" : "\n") + p.msg.content;
      b.msg.calls.insert(b.msg.calls.end(), p.msg.calls.begin(), p.msg.calls.end());
      b.origins.insert(b.origins.end(), p.origins.begin(), p.origins.end());
      b.marks.insert(b.marks.end(), p.marks.begin(), p.marks.end());
      b.label = fmt::format("messages #{}-#{} (merged, as {})", b.origins.front(), b.origins.back(), b.msg.role);
      ++merged;
    } else {
      m.push_back(std::move(p));
    }
  }
  *plan = std::move(m);
  return merged;
}

}  // namespace

std::vector<Planned> Plan(const Transcript& t, const ChatTemplate& tmpl, nlohmann::json* info) {
  const bool list_tools = !t.tools.empty() && !tmpl.supports_tools;
  std::vector<Planned> out;
  bool listed = false;
  for (const Message& m : t.messages) {
    // The tools are listed in the first system message, else in one added before the others.
    const bool list_here = m.role == "system" && list_tools && !listed;
    listed |= list_here;
    out.push_back(PlanMessage(m, tmpl, t.tools, list_here));
  }
  if (list_tools && !listed) {
    Planned sys;
    sys.msg.role = "system";
    sys.msg.content = ToolListing(t.tools);
    sys.label = "tool list (system message added)";
    out.insert(out.begin(), std::move(sys));
  }
  const int merged = tmpl.alternation ? MergeSameRole(&out) : 0;
  (*info)["tool_call_form"] = tmpl.supports_tool_calls ? "template" : "<tool_call> in content";
  (*info)["tool_result_form"] = tmpl.tool_role ? "tool role" : "<tool_response> in user message";
  (*info)["tools_in_system"] = list_tools;
  (*info)["merged_messages"] = merged;
  return out;
}

}  // namespace flipscope::workload
