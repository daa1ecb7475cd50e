// util: the library's one error style (Status / Result<T>) and small shared helpers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace flipscope {

// What kind of error a Status holds, so callers branch on a code and never on message text.
enum class StatusCode {
  kOk,
  kError,            // anything not classified below
  kInvalidArgument,  // a value the caller gave is wrong (a knob, an option, a key)
  kRefused,          // the engine declined a valid request (llama.cpp refused the configuration)
  kIo,               // reading or writing a file failed (missing, unreadable, disk full)
};

// An option's name inside an error message, in the library's words (the field of an options
// struct or an experiment file's key, e.g. "max_tokens"): the Status records where each one
// stands, so that the command line can name its flag there (Status::WithOptionNames) without
// searching the text.
inline std::string OptionName(std::string_view name) {
  return std::string("\x1d").append(name).append("\x1e");
}

// Status: success, or an error with a one-line message that names the file and what is wrong.
class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(StatusCode::kError, std::move(message)); }
  static Status InvalidArgument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }
  static Status Refused(std::string message) { return Status(StatusCode::kRefused, std::move(message)); }
  static Status Io(std::string message) { return Status(StatusCode::kIo, std::move(message)); }
  bool ok() const { return !msg_.has_value(); }
  StatusCode code() const { return code_; }
  explicit operator bool() const { return ok(); }
  // The error message; empty when ok().
  const std::string& message() const {
    static const std::string empty;
    return msg_ ? *msg_ : empty;
  }
  // Returns an error whose message is "prefix: message"; ok stays ok. The option names of both stay marked.
  Status Prefixed(const std::string& prefix) const {
    if (ok()) return *this;
    Status s(code_, prefix + ": ");
    const size_t shift = s.msg_->size();
    s.msg_->append(*msg_);
    for (Span f : options_) s.options_.push_back({f.at + shift, f.size});
    return s;
  }
  // The option names marked in the message (OptionName), in order.
  std::vector<std::string> OptionNames() const {
    std::vector<std::string> out;
    for (Span f : options_) out.push_back(msg_->substr(f.at, f.size));
    return out;
  }
  // The same error with every marked option name found in `names` replaced by its entry there
  // (the command line's flag for it); the code and every other character stay. ok stays ok.
  Status WithOptionNames(const std::map<std::string, std::string, std::less<>>& names) const {
    if (ok()) return *this;
    Status s = *this;
    s.msg_->clear();
    s.options_.clear();
    size_t from = 0;
    for (Span f : options_) {
      s.msg_->append(*msg_, from, f.at - from);
      const std::string_view name = std::string_view(*msg_).substr(f.at, f.size);
      const auto it = names.find(name);
      const std::string_view shown = it == names.end() ? name : std::string_view(it->second);
      s.options_.push_back({s.msg_->size(), shown.size()});
      s.msg_->append(shown);
      from = f.at + f.size;
    }
    s.msg_->append(*msg_, from);
    return s;
  }

 private:
  struct Span {
    size_t at, size;
  };
  static constexpr char kNameBegin = '\x1d', kNameEnd = '\x1e';

  // Messages quote what users wrote (a role, a key, a path); a control character there, such as a
  // newline inside a JSON string, is written as an escape (\n, \t, \x01) so that every message
  // stays the one line the CLI promises. An option name between OptionName's marks (no control
  // character inside) is kept, unmarked, and its place recorded.
  void SetMessage(const std::string& m) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(m.size());
    for (size_t i = 0; i < m.size(); ++i) {
      const char c = m[i];
      if (c == kNameBegin) {
        const size_t end = m.find(kNameEnd, i + 1);
        if (end != std::string::npos && std::none_of(m.begin() + long(i) + 1, m.begin() + long(end), IsControl)) {
          options_.push_back({out.size(), end - i - 1});
          out.append(m, i + 1, end - i - 1);
          i = end;
          continue;
        }
      }
      if (!IsControl(c))
        out += c;
      else if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else if (c == '\r')
        out += "\\r";
      else
        out += std::string("\\x") + kHex[(c >> 4) & 0xF] + kHex[c & 0xF];
    }
    msg_ = std::move(out);
  }
  static bool IsControl(char c) { return (static_cast<unsigned char>(c) < 0x20) || c == 0x7F; }

  Status(StatusCode code, const std::string& m) : code_(code) { SetMessage(m); }
  StatusCode code_ = StatusCode::kOk;
  std::optional<std::string> msg_;
  std::vector<Span> options_;  // where the message names options (OptionName)
};

// Result<T>: a value or an error Status (never both).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}       // NOLINT: implicit by design
  Result(Status error) : v_(std::move(error)) {}  // NOLINT: must be an error
  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // The error; Status::Ok() when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace flipscope

// Propagates an error Status from an expression returning Status.
#define FS_RETURN_IF_ERROR(expr)      \
  do {                                \
    ::flipscope::Status _st = (expr); \
    if (!_st.ok()) return _st;        \
  } while (0)

#define FS_CONCAT_INNER(a, b) a##b
#define FS_CONCAT(a, b) FS_CONCAT_INNER(a, b)
// Declares `lhs` from a Result expression, returning its error Status on failure.
#define FS_ASSIGN_OR_RETURN(lhs, expr) FS_ASSIGN_OR_RETURN_IMPL(FS_CONCAT(_res_, __LINE__), lhs, expr)
#define FS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
