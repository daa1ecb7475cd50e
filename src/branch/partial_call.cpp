// A call against the transcript's: how a complete one differs, and an unfinished one: what it has written already
// differs from the reference call at the same place, however it would have ended.
#include <fmt/format.h>

#include "branch/verdict.h"

namespace flipscope {
namespace {

// A SAX reader whose every scalar is one Value, every opening one Start and every closing one End;
// the two readers below differ only in those three.
struct ScalarSax : nlohmann::json_sax<nlohmann::json> {
  virtual bool Value(const nlohmann::json& v) = 0;
  virtual bool Start(bool object) = 0;
  virtual bool End() = 0;
  bool null() override { return Value(nullptr); }
  bool boolean(bool b) override { return Value(b); }
  bool number_integer(number_integer_t n) override { return Value(n); }
  bool number_unsigned(number_unsigned_t n) override { return Value(n); }
  bool number_float(number_float_t x, const string_t&) override { return Value(x); }
  bool string(string_t& s) override { return Value(s); }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return Start(true); }
  bool start_array(std::size_t) override { return Start(false); }
  bool end_object() override { return End(); }
  bool end_array() override { return End(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// Walks an unfinished call's JSON and compares what it has finished with the reference call at
// the same place: the function name, and inside the arguments every key, every finished value and
// the size of every container it closed. Stops at the first difference.
struct PartialSax : ScalarSax {
  struct Level {
    const nlohmann::json* ref;  // the reference's container here (null: outside the arguments)
    bool object;
    size_t count = 0;       // values so far
    bool awaiting = false;  // an object's key is written, its value not yet
    std::string key;        // the object's current key
    std::string where;      // "lines", "lines[0]": the place, for reasons
  };
  const nlohmann::json& call;
  std::vector<Level> stack;
  std::string difference;
  explicit PartialSax(const nlohmann::json& ref) : call(ref) {}

  // The place of the next value and the reference's value there (null: none). `compared`: the
  // place is the name or lies inside the arguments.
  const nlohmann::json* Next(std::string* where, bool* compared) const {
    *compared = false;
    if (stack.empty()) return nullptr;
    const Level& l = stack.back();
    if (stack.size() == 1) {  // the call object: its name and arguments only
      *compared = l.key == "name" || l.key == "arguments";
      *where = l.key;
      return *compared && call.contains(l.key) ? &call[l.key] : nullptr;
    }
    *compared = l.ref != nullptr;
    *where = l.object ? (l.where.empty() ? "" : l.where + ".") + l.key : fmt::format("{}[{}]", l.where, l.count);
    if (!l.ref) return nullptr;
    if (l.object) return l.ref->is_object() && l.ref->contains(l.key) ? &(*l.ref)[l.key] : nullptr;
    return l.ref->is_array() && l.count < l.ref->size() ? &(*l.ref)[l.count] : nullptr;
  }
  bool Differs(std::string why) {
    difference = std::move(why);
    return false;
  }
  void Count() {
    if (stack.empty()) return;
    ++stack.back().count;
    stack.back().awaiting = false;
  }
  bool Value(const nlohmann::json& v) override {
    std::string where;
    bool compared = false;
    const nlohmann::json* r = Next(&where, &compared);
    Count();
    if (!compared || (stack.size() == 1 && where != "name")) return true;
    if (stack.size() == 1)
      return !r || *r == v ? true : Differs(fmt::format("calls {} instead of {}", v.dump(), r->dump()));
    if (!r) return Differs(fmt::format("adds \"{}\": {}", where, v.dump()));
    return *r == v ? true : Differs(fmt::format("sets \"{}\" to {} instead of {}", where, v.dump(), r->dump()));
  }
  bool Start(bool object) override {
    std::string where;
    bool compared = false;
    const nlohmann::json* r = stack.empty() ? &call : Next(&where, &compared);
    Count();
    if (stack.size() >= 2 && compared && !r) return Differs(fmt::format("adds \"{}\"", where));
    const bool args = stack.size() == 1 && where == "arguments";
    stack.push_back({stack.empty() || args || (stack.size() >= 2 && compared) ? r : nullptr, object, 0, false, "",
                     args ? "" : where});
    return true;
  }
  bool key(string_t& k) override {
    stack.back().key = k;
    stack.back().awaiting = true;
    return true;
  }
  bool End() override {
    const Level l = stack.back();
    stack.pop_back();
    if (stack.size() >= 1 && l.ref && l.count != l.ref->size())  // closed with more or fewer parts
      return Differs(fmt::format("closes {} with {} {} instead of {}",
                                 l.where.empty() ? std::string("the arguments") : "\"" + l.where + "\"", l.count,
                                 l.object ? "keys" : "items", l.ref->size()));
    return true;
  }
};

// The string a JSON text ends inside, unescaped as far as it goes; nullopt when it does not end
// inside one.
std::optional<std::string> OpenString(std::string_view text) {
  bool in = false, esc = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (esc) {
      esc = false;
    } else if (in && text[i] == '\\') {
      esc = true;
    } else if (text[i] == '"') {
      in = !in;
      start = i;
    }
  }
  if (!in) return std::nullopt;
  std::string raw(text.substr(start));
  if (esc) raw.pop_back();  // an escape cut in two
  if (size_t u = raw.rfind("\\u"); u != std::string::npos && raw.size() - u < 6) raw.resize(u);
  nlohmann::json j = nlohmann::json::parse(raw + "\"", nullptr, false);
  return j.is_string() ? std::optional<std::string>(j.get<std::string>()) : std::nullopt;
}

// Collects what an unfinished call has finished: its name and its arguments' finished values
// (a value still being written, or a container not yet closed, is left out).
struct FinishedSax : ScalarSax {
  nlohmann::json out = nlohmann::json::object();
  int depth = 0;  // 1: the call object, 2: its arguments (or another top-level value)
  bool in_args = false;
  std::string current;  // the current key at depth 1 or 2
  int skip = 0;         // containers open inside an argument's value
  bool Value(const nlohmann::json& v) override {
    if (skip > 0) return true;
    if (depth == 1 && current == "name") out["name"] = v;
    if (depth == 2 && in_args) out["arguments"][current] = v;
    return true;
  }
  bool Start(bool object) override {
    if (skip > 0 || depth >= 2) {
      ++skip;
      return true;
    }
    if (depth == 1) {
      in_args = object && current == "arguments";
      if (!in_args) {
        ++skip;
        return true;
      }
      out["arguments"] = nlohmann::json::object();
    }
    ++depth;
    return true;
  }
  bool key(string_t& k) override {
    if (skip == 0) current = k;
    return true;
  }
  bool End() override {
    if (skip > 0) {
      --skip;
      return true;
    }
    if (--depth == 1) in_args = false;
    return true;
  }
};

}  // namespace

std::string PartialCallDifference(std::string_view body, const nlohmann::json& ref) {
  PartialSax sax(ref);
  const std::string_view text = TrimSpace(body);
  nlohmann::json::sax_parse(text, &sax);
  if (!sax.difference.empty() || sax.stack.empty()) return sax.difference;
  // The value being written where the text was cut: an unfinished string that is no longer a
  // prefix of the reference's value at its place differs however it would have ended. (In an
  // object a string is a key until the key is written; a key being written is no value yet.)
  const auto open = OpenString(text);
  const PartialSax::Level& l = sax.stack.back();
  if (!open || (l.object && !l.awaiting)) return "";
  std::string where;
  bool compared = false;
  const nlohmann::json* r = sax.Next(&where, &compared);
  if (!compared || (sax.stack.size() == 1 && where != "name")) return "";
  if (r && r->is_string() && r->get<std::string>().compare(0, open->size(), *open) == 0) return "";
  const std::string shown = open->size() > 48 ? open->substr(0, 48) + "..." : *open;
  if (sax.stack.size() == 1) return fmt::format("calls \"{}\" (unfinished) instead of {}", shown, r ? r->dump() : "?");
  if (!r) return fmt::format("adds \"{}\": \"{}\" (unfinished)", where, shown);
  return fmt::format("sets \"{}\" to \"{}\" (unfinished) instead of {}", where, shown, r->dump());
}

// How a call differs from the reference's: the function, or the first differing argument.
std::string DescribeCallDifference(const nlohmann::json& call, const nlohmann::json& ref) {
  if (call["name"] != ref["name"])
    return fmt::format("calls {} instead of {}", call["name"].dump(), ref["name"].dump());
  const nlohmann::json& a = call["arguments"];
  const nlohmann::json& r = ref["arguments"];
  for (auto& [k, v] : r.items()) {
    if (!a.contains(k)) return fmt::format("{} drops argument \"{}\"", call["name"].dump(), k);
    if (a[k] != v)
      return fmt::format("{} sets \"{}\" to {} instead of {}", call["name"].dump(), k, a[k].dump(), v.dump());
  }
  for (auto& [k, v] : a.items())
    if (!r.contains(k)) return fmt::format("{} adds argument \"{}\": {}", call["name"].dump(), k, v.dump());
  return "the same call";
}

nlohmann::json PartialCallSoFar(std::string_view body) {
  FinishedSax sax;
  nlohmann::json::sax_parse(TrimSpace(body), &sax);
  if (!sax.out.contains("name") || !sax.out["name"].is_string()) return nullptr;
  if (!sax.out.contains("arguments")) sax.out["arguments"] = nlohmann::json::object();
  return sax.out;
}

}  // namespace flipscope
