// util: the library's one error style (Status / Result<T>) and small shared helpers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace flipscope {

// What kind of error a Status holds, so callers branch on a code and never on message text.
enum class StatusCode {
  kOk,
  kError,            // anything not classified below
  kInvalidArgument,  // a value the caller gave is wrong (a knob, an option, a key)
  kRefused,          // the engine declined a valid request (llama.cpp refused the configuration)
  kIo,               // reading or writing a file failed (missing, unreadable, disk full)
};

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
  // Returns an error whose message is "prefix: message"; ok stays ok.
  Status Prefixed(const std::string& prefix) const { return ok() ? *this : Status(code_, prefix + ": " + *msg_); }
  // Returns an error of the same code with another message (the CLI's wording of it); ok stays ok.
  Status Reworded(std::string message) const { return ok() ? *this : Status(code_, std::move(message)); }

 private:
  // Messages quote what users wrote (a role, a key, a path); a control character there, such as a
  // newline inside a JSON string, is written as an escape (\n, \t, \x01) so that every message
  // stays the one line the CLI promises.
  static std::string OneLine(std::string m) {
    static constexpr char kHex[] = "0123456789abcdef";
    if (std::none_of(m.begin(), m.end(), [](char c) { return IsControl(c); })) return m;
    std::string out;
    for (char c : m) {
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
    return out;
  }
  static bool IsControl(char c) { return (static_cast<unsigned char>(c) < 0x20) || c == 0x7F; }

  Status(StatusCode code, std::string m) : code_(code), msg_(OneLine(std::move(m))) {}
  StatusCode code_ = StatusCode::kOk;
  std::optional<std::string> msg_;
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
