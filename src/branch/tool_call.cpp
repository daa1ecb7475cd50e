// Tool calls in a future: find the envelope, check it closes, parses and calls a known function
// with its required arguments.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "branch/verdict.h"

namespace flipscope {

std::string_view TrimSpace(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

namespace {

// A SAX handler that accepts everything, remembers the first top-level "name" string, and stops
// at the first syntax error, keeping its position.
struct PrefixSax : nlohmann::json_sax<nlohmann::json> {
  int depth = 0;
  bool next_is_name = false;
  std::optional<std::string> name;
  size_t error_pos = 0;
  std::string error;
  bool Value() {
    next_is_name = false;
    return true;
  }
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t& s) override {
    if (next_is_name && !name) name = s;
    return Value();
  }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override {
    next_is_name = false;
    ++depth;
    return true;
  }
  bool key(string_t& k) override {
    next_is_name = depth == 1 && k == "name";
    return true;
  }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override {
    next_is_name = false;
    ++depth;
    return true;
  }
  bool end_array() override {
    --depth;
    return true;
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& e) override {
    error_pos = pos;
    error = e.what();
    return false;
  }
};

// The short part of nlohmann's message: "syntax error while parsing ... - invalid literal".
std::string ShortJsonError(const std::string& what) {
  size_t s = what.find("syntax error");
  std::string m = s == std::string::npos ? what : what.substr(s);
  size_t lr = m.find("; last read");
  return lr == std::string::npos ? m : m.substr(0, lr);
}

// Scans a call prefix: true when it can still become JSON; sets name when a complete top-level
// "name" string is already there.
bool ScanPrefix(std::string_view text, std::optional<std::string>* name, std::string* error) {
  PrefixSax sax;
  bool ok = nlohmann::json::sax_parse(text, &sax);
  if (name) *name = sax.name;
  // nlohmann reports running out of input at a position past the end; anything earlier is a
  // real syntax error.
  if (ok || sax.error_pos > text.size()) return true;
  if (error) *error = ShortJsonError(sax.error);
  return false;
}

const ToolSpec* FindTool(const std::vector<ToolSpec>& tools, const std::string& name) {
  auto it = std::find_if(tools.begin(), tools.end(), [&](const ToolSpec& t) { return t.name == name; });
  return it == tools.end() ? nullptr : &*it;
}

// Collects an unfinished call's keys with their depth (1: the call object's own keys) and the
// shape of each key's value, until the text ends or breaks.
struct KeySax : nlohmann::json_sax<nlohmann::json> {
  // A key's value as far as it was written: 'o' object, 'a' array, 's' string (`text` holds it),
  // 'v' another scalar, 0 not begun.
  struct Key {
    int depth;
    std::string name;
    char shape = 0;
    std::string text;
  };
  int depth = 0;
  std::vector<Key> keys;
  bool pending = false;  // the last key's value is the next event
  bool Value(char shape, const std::string& text = "") {
    if (pending) keys.back().shape = shape, keys.back().text = text;
    pending = false;
    return true;
  }
  bool null() override { return Value('v'); }
  bool boolean(bool) override { return Value('v'); }
  bool number_integer(number_integer_t) override { return Value('v'); }
  bool number_unsigned(number_unsigned_t) override { return Value('v'); }
  bool number_float(number_float_t, const string_t&) override { return Value('v'); }
  bool string(string_t& s) override { return Value('s', s); }
  bool binary(binary_t&) override { return Value('v'); }
  bool start_object(std::size_t) override { return Value('o'), ++depth, true; }
  bool key(string_t& k) override { return keys.push_back({depth, k, 0, ""}), pending = true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return Value('a'), ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// The words of a tool definition (JSON schema and the function's own keys), each with the shape
// its value has in a definition: `"items": {"type": "string"}` is a schema's, `"items": [...]`
// (an order's items copied from a tool's output) is data.
constexpr std::pair<std::string_view, char> kDefinitionKeys[] = {
    {"type", 's'},     {"function", 'o'}, {"parameters", 'o'}, {"properties", 'o'},
    {"required", 'a'}, {"items", 'o'},    {"enum", 'a'},       {"description", 's'}};

// Whether a key and its value read as part of a tool definition: a definition's key whose value
// has a definition's shape (not begun counts), and a `type` names a JSON type or a function.
bool DefinitionKey(const KeySax::Key& k) {
  auto it = std::find_if(std::begin(kDefinitionKeys), std::end(kDefinitionKeys),
                         [&](const auto& d) { return d.first == k.name; });
  if (it == std::end(kDefinitionKeys) || (k.shape != 0 && k.shape != it->second)) return false;
  static constexpr std::string_view kTypes[] = {"string", "number", "integer", "boolean",
                                                "object", "array",  "null",    "function"};
  return k.name != "type" || k.shape == 0 ||
         std::find(std::begin(kTypes), std::end(kTypes), k.text) != std::end(kTypes);
}

// How an unfinished call has run on into something that is no call: a key beside its name and
// arguments, the name or the arguments a second time (no client reads such a call one way), or a
// key of a tool definition (`"type": "function"`, `"parameters"`) inside them that the tool does
// not take as an argument. "" when it has not. `beside`: also the keys beside the name and arguments.
std::string StrayKey(std::string_view body, const ToolSpec* tool, bool beside = true) {
  KeySax sax;
  nlohmann::json::sax_parse(body, &sax);
  std::set<std::string> top;
  for (const KeySax::Key& k : sax.keys) {
    if (beside && k.depth == 1 && !top.insert(k.name).second) return fmt::format("writes \"{}\" a second time", k.name);
    if (beside && k.depth == 1 && k.name != "name" && k.name != "arguments")
      return fmt::format("writes \"{}\" beside its name and arguments", k.name);
    const bool argument =
        tool && std::find(tool->properties.begin(), tool->properties.end(), k.name) != tool->properties.end();
    if (k.depth > 1 && DefinitionKey(k) && !argument)
      return fmt::format("writes \"{}\", a key of a tool definition, into its arguments", k.name);
  }
  return "";
}

// Checks a complete call body: JSON object, name, arguments object, known function, required args.
CallCheck CheckClosed(std::string_view body, const std::vector<ToolSpec>& tools) {
  CallCheck r;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    std::string err;
    ScanPrefix(body, nullptr, &err);
    r.problem = "the tool-call JSON does not parse" + (err.empty() ? std::string(" (it ends early)") : ": " + err);
    return r;
  }
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
    r.problem = "the tool call has no function name";
    return r;
  }
  std::string name = j["name"].get<std::string>();
  nlohmann::json args = j.value("arguments", nlohmann::json::object());
  if (args.is_string()) {  // OpenAI style: arguments as a JSON string
    nlohmann::json inner = nlohmann::json::parse(args.get<std::string>(), nullptr, false);
    if (inner.is_discarded()) {
      r.problem = "the arguments of \"" + name + "\" are a string that is not JSON";
      return r;
    }
    args = inner;
  }
  if (!args.is_object()) {
    r.problem = "the arguments of \"" + name + "\" are not an object";
    return r;
  }
  if (!tools.empty()) {
    const ToolSpec* t = FindTool(tools, name);
    if (!t) {
      r.problem = "calls \"" + name + "\", which is not among the workload's tools";
      return r;
    }
    for (const std::string& req : t->required)
      if (!args.contains(req)) {
        r.problem = "\"" + name + "\" misses its required argument \"" + req + "\"";
        return r;
      }
    // A JSON schema given as an argument's value ({"order_id": {"type": "string"}}) is the tool's
    // definition copied, no argument, complete or not.
    if (std::string stray = StrayKey(body, t, false); !stray.empty()) {
      r.problem = "\"" + name + "\" " + stray;
      return r;
    }
  }
  r.call = nlohmann::json{{"name", name}, {"arguments", args}};
  return r;
}

}  // namespace

Result<std::vector<ToolSpec>> ParseToolSpecs(const nlohmann::json& tools) {
  std::vector<ToolSpec> out;
  if (tools.is_null()) return out;
  if (!tools.is_array()) return Status::Error("tools must be an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::json& t = tools[i];
    const nlohmann::json& f = t.is_object() && t.contains("function") ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
      return Status::Error(fmt::format("tools[{}] has no function name", i));
    ToolSpec spec;
    spec.name = f["name"].get<std::string>();
    if (f.contains("parameters") && f["parameters"].is_object() && f["parameters"].contains("properties") &&
        f["parameters"]["properties"].is_object())
      for (auto& [key, schema] : f["parameters"]["properties"].items()) spec.properties.push_back(key);
    if (f.contains("parameters") && f["parameters"].is_object() && f["parameters"].contains("required")) {
      const nlohmann::json& req = f["parameters"]["required"];
      if (!req.is_array())
        return Status::Error(fmt::format("tools[{}] ({}): \"required\" is not an array", i, spec.name));
      for (const auto& r : req) {
        if (!r.is_string())
          return Status::Error(fmt::format("tools[{}] ({}): \"required\" holds a non-string", i, spec.name));
        spec.required.push_back(r.get<std::string>());
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

bool IsJsonPrefix(std::string_view text) { return ScanPrefix(text, nullptr, nullptr); }

CallText ExtractCall(std::string_view prefix, std::string_view cont, const ToolEnvelope& env) {
  CallText c;
  if (env.open.empty() || env.close.empty()) return c;
  std::string all = std::string(prefix) + std::string(cont);
  const size_t boundary = prefix.size();
  size_t start = std::string::npos;  // where the open marker starts in `all`
  size_t last_open = prefix.rfind(env.open);
  if (last_open != std::string::npos && prefix.find(env.close, last_open + env.open.size()) == std::string::npos) {
    start = last_open;  // the branch point is inside this call
  } else {
    // An open marker in the continuation, possibly begun at the end of the prefix.
    size_t from = boundary >= env.open.size() - 1 ? boundary - (env.open.size() - 1) : 0;
    size_t at = all.find(env.open, from);
    // The markers named with nothing between them (`within <tool_call></tool_call> tags`) are
    // words about calls, not a call.
    auto mention = [&](size_t open) {
      const size_t close = all.find(env.close, open + env.open.size());
      return close != std::string::npos &&
             TrimSpace(std::string_view(all).substr(open + env.open.size(), close - open - env.open.size())).empty();
    };
    while (at != std::string::npos && mention(at))
      at = all.find(env.open, all.find(env.close, at + env.open.size()) + env.close.size());
    if (at != std::string::npos && at + env.open.size() > boundary) start = at;
  }
  if (start == std::string::npos) return c;
  c.present = true;
  size_t body = start + env.open.size();
  size_t close = all.find(env.close, body);
  c.closed = close != std::string::npos;
  c.body = all.substr(body, c.closed ? close - body : std::string::npos);
  c.begin = start;
  c.end = c.closed ? close + env.close.size() : all.size();
  // Cut inside the close marker after a complete call: the marker's first bytes are no part of
  // the JSON (a "<" inside an unfinished string is: the JSON must be complete without it).
  for (size_t n = std::min(env.close.size() - 1, c.body.size()); !c.closed && n > 0; --n) {
    if (c.body.compare(c.body.size() - n, n, env.close, 0, n) != 0) continue;
    const std::string_view json = TrimSpace(std::string_view(c.body).substr(0, c.body.size() - n));
    if (nlohmann::json::accept(json)) {
      c.body.resize(c.body.size() - n);
      c.closing = true;
    }
    break;
  }
  // Cut right after a complete JSON object, before its marker began: as good as closing.
  if (!c.closed && !c.closing && TrimSpace(c.body).starts_with('{') && nlohmann::json::accept(TrimSpace(c.body)))
    c.closing = true;
  return c;
}

CallCheck CheckCall(const CallText& c, bool ended, const std::vector<ToolSpec>& tools, const CallText* reference) {
  if (!c.present) return {};
  // A call cut while writing its close marker is judged as the complete call it is.
  if (c.closed || (c.closing && !ended)) return CheckClosed(TrimSpace(c.body), tools);
  CallCheck r;
  std::string_view body = TrimSpace(c.body);
  std::optional<std::string> name;
  std::string err;
  // An ended future's text ends with its end-of-turn token, which is no part of the JSON.
  if (ended) {
    r.problem = "the tool-call envelope is never closed: the future ends first";
  } else if (!ScanPrefix(body, &name, &err)) {
    r.problem = "the tool-call JSON is malformed: " + err;
  } else if (name && !tools.empty() && !FindTool(tools, *name)) {
    r.problem = "calls \"" + *name + "\", which is not among the workload's tools";
  } else if (const std::string stray = StrayKey(body, name ? FindTool(tools, *name) : nullptr); !stray.empty()) {
    r.problem = "the unfinished call runs on into something else: it " + stray;
  } else if (reference && reference->present && reference->closed &&
             c.body.size() > reference->body.size() + kCallCloseSlack) {
    // Longer than the reference's whole call and still open: not merely cut by the budget.
    r.overlong = true;
    r.problem = fmt::format("the tool-call envelope is not closed after {} bytes (the reference closes it after {})",
                            c.body.size(), reference->body.size());
  }
  return r;
}

}  // namespace flipscope
