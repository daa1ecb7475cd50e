// Names<E>: the one table of an enum's spellings (in files, flags and messages), and the lookups
// every stage uses on it. A stage specializes Names beside its enum:
//   template <> struct Names<FlashAttn> {
//     static constexpr std::pair<FlashAttn, const char*> v[] = {{FlashAttn::kOn, "on"}, ...};
//   };
// and reads a name with ParseName, which refuses a bad one naming the field and the choices.
#pragma once

#include <fmt/format.h>

#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "util/status.h"

namespace flipscope {

// Specialized for each named enum: v lists (value, name) in the order help and errors list them.
template <typename E>
struct Names;

// The name of value; "?" for a value the table does not list.
template <typename E>
std::string_view NameOf(E value) {
  for (const auto& [e, name] : Names<E>::v)
    if (e == value) return name;
  return "?";
}

// The value named name, or none.
template <typename E>
std::optional<E> FromName(std::string_view name) {
  for (const auto& [e, n] : Names<E>::v)
    if (name == n) return e;
  return std::nullopt;
}

// "on, off or auto": what a field of type E accepts.
template <typename E>
std::string Choices() {
  std::string list;
  const size_t n = std::size(Names<E>::v);
  for (size_t i = 0; i < n; ++i)
    list += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + std::string(Names<E>::v[i].second);
  return list;
}

// The value named name; else an invalid-argument error "<field> must be a, b or c, not 'x'".
template <typename E>
Result<E> ParseName(std::string_view name, std::string_view field) {
  if (auto e = FromName<E>(name)) return *e;
  return Status::InvalidArgument(fmt::format("{} must be {}, not '{}'", field, Choices<E>(), name));
}

}  // namespace flipscope
