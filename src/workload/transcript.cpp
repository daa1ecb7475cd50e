// Chat transcripts in the OpenAI request shape: parsing and validation.
#include <fmt/format.h>

#include <map>
#include <set>

#include "workload/internal.h"

namespace flipscope::workload {
namespace {

// nlohmann's messages start with "[json.exception.parse_error.101] "; the bracketed id helps nobody.
std::string JsonWhat(const std::exception& e) {
  std::string w = e.what();
  size_t close = w.find("] ");
  return (w.rfind("[json.exception", 0) == 0 && close != std::string::npos) ? w.substr(close + 2) : w;
}

// Content may be a string, null, or an array of {"type": "text", "text": ...} parts.
Result<std::string> ContentOf(const OrderedJson& m, const std::string& where) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) return Status::Error(where + ": content must be a string, null or an array of text parts");
  std::string out;
  for (const auto& part : *it) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      return Status::Error(where + ": only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    out += part["text"].get<std::string>();
  }
  return out;
}

// A tool call; arguments that are not JSON are kept as written, with one line in *warnings.
Result<ToolCall> ParseCall(const OrderedJson& c, int index, const std::string& where,
                           std::vector<std::string>* warnings) {
  std::string w = fmt::format("{}: tool call #{}", where, index);
  if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
    return Status::Error(w + ": needs a \"function\" object");
  const auto& f = c["function"];
  if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
    return Status::Error(w + ": function needs a name");
  if (c.contains("type") && c["type"] != "function") return Status::Error(w + ": only type \"function\" is supported");
  ToolCall call;
  call.index = index;
  call.name = f["name"].get<std::string>();
  call.id = c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : fmt::format("call_{}", index);
  const OrderedJson args = f.contains("arguments") ? f["arguments"] : OrderedJson::object();
  if (args.is_string()) {
    // Arguments arrive as a JSON string in the OpenAI shape; keep text that is not JSON as it was
    // written (a model may well have produced broken arguments).
    call.arguments_text = args.get<std::string>();
    try {
      call.arguments = OrderedJson::parse(call.arguments_text);
    } catch (const std::exception& e) {
      call.arguments = call.arguments_text;
      warnings->push_back(
          fmt::format("{} ({}): arguments are not JSON ({}); kept as written", w, call.name, JsonWhat(e)));
    }
  } else if (args.is_object()) {
    call.arguments = args;
    call.arguments_text = DumpSpaced(args);
  } else {
    return Status::Error(w + ": arguments must be a JSON string or an object");
  }
  return call;
}

// Builds a transcript message by message, checking roles and tool-call references.
class Builder {
 public:
  Status AddTools(const OrderedJson& tools, const std::string& where) {
    if (!tools.is_array()) return Status::Error(where + ": \"tools\" must be an array");
    for (const auto& t : tools) {
      const OrderedJson* f = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
      if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string())
        return Status::Error(where + ": each tool needs {\"type\": \"function\", \"function\": {\"name\": ...}}");
      t_.tools.push_back(t);
    }
    return Status::Ok();
  }

  // where: "path:LINE" or "path"; the message number is added here.
  Status AddMessage(const OrderedJson& m, const std::string& file_where) {
    Message msg;
    msg.index = int(t_.messages.size()) + 1;
    std::string where = fmt::format("{}: message #{}", file_where, msg.index);
    if (!m.is_object()) return Status::Error(where + ": must be a JSON object");
    if (!m.contains("role") || !m["role"].is_string()) return Status::Error(where + ": needs a \"role\"");
    msg.role = m["role"].get<std::string>();
    static const std::set<std::string> kRoles = {"system", "user", "assistant", "tool"};
    if (!kRoles.count(msg.role))
      return Status::Error(where + ": unknown role '" + msg.role + "' (expected system, user, assistant or tool)");
    FS_ASSIGN_OR_RETURN(msg.content, ContentOf(m, where));
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (msg.role != "assistant") return Status::Error(where + ": only assistant messages may have tool_calls");
      if (!m["tool_calls"].is_array()) return Status::Error(where + ": tool_calls must be an array");
      for (const auto& c : m["tool_calls"]) {
        FS_ASSIGN_OR_RETURN(ToolCall call, ParseCall(c, ++t_.n_calls, where, &t_.warnings));
        if (calls_.count(call.id)) return Status::Error(where + ": tool call id '" + call.id + "' is used twice");
        calls_[call.id] = call.index;
        names_[call.index] = call.name;
        msg.calls.push_back(std::move(call));
      }
    }
    if (msg.role == "tool") {
      if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string())
        return Status::Error(where + ": a tool message needs a \"tool_call_id\"");
      msg.tool_call_id = m["tool_call_id"].get<std::string>();
      auto it = calls_.find(msg.tool_call_id);
      if (it == calls_.end())
        return Status::Error(where + ": tool_call_id '" + msg.tool_call_id + "' refers to no earlier tool call");
      msg.answers_call = it->second;
      msg.tool_name = names_[it->second];
    }
    t_.messages.push_back(std::move(msg));
    return Status::Ok();
  }

  Result<Transcript> Finish(const std::string& path) {
    if (t_.messages.empty()) return Status::Error(path + ": the transcript has no messages");
    return std::move(t_);
  }

 private:
  Transcript t_;
  std::map<std::string, int> calls_;  // tool call id -> call index
  std::map<int, std::string> names_;  // call index -> function name
};

}  // namespace

std::string DumpSpaced(const OrderedJson& j) {
  if (j.is_object()) {
    std::string s = "{";
    for (auto it = j.begin(); it != j.end(); ++it)
      s += (it == j.begin() ? "" : ", ") + OrderedJson(it.key()).dump() + ": " + DumpSpaced(it.value());
    return s + "}";
  }
  if (j.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < j.size(); ++i) s += (i ? ", " : "") + DumpSpaced(j[i]);
    return s + "]";
  }
  return j.dump();
}

Result<Transcript> ParseChatJson(const std::string& text, const std::string& path) {
  OrderedJson j;
  try {
    j = OrderedJson::parse(text);
  } catch (const std::exception& e) {
    return Status::Error(path + ": invalid JSON: " + JsonWhat(e));
  }
  Builder b;
  const OrderedJson* messages = &j;
  if (j.is_object()) {
    if (!j.contains("messages")) return Status::Error(path + ": a chat transcript needs a \"messages\" array");
    if (j.contains("tools") && !j["tools"].is_null()) FS_RETURN_IF_ERROR(b.AddTools(j["tools"], path));
    messages = &j["messages"];
  }
  if (!messages->is_array()) return Status::Error(path + ": \"messages\" must be an array");
  for (const auto& m : *messages) FS_RETURN_IF_ERROR(b.AddMessage(m, path));
  return b.Finish(path);
}

Result<Transcript> ParseChatJsonl(const std::string& text, const std::string& path) {
  Builder b;
  size_t start = 0;
  for (int line = 1; start < text.size(); ++line) {
    size_t nl = text.find('\n', start);
    std::string s = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? text.size() : nl + 1;
    if (s.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = fmt::format("{}:{}", path, line);
    OrderedJson j;
    try {
      j = OrderedJson::parse(s);
    } catch (const std::exception& e) {
      return Status::Error(where + ": invalid JSON: " + JsonWhat(e));
    }
    if (j.is_object() && j.size() == 1 && j.contains("tools")) {
      FS_RETURN_IF_ERROR(b.AddTools(j["tools"], where));
      continue;
    }
    FS_RETURN_IF_ERROR(b.AddMessage(j, where));
  }
  return b.Finish(path);
}

}  // namespace flipscope::workload
