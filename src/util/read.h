// Tolerant reads of a JSON document (results.json and the records in a manifest are outside input:
// any part may be missing or of another type). The one set of readers the results model, the report
// and the engine's records share: a missing or mistyped value reads as the fallback or nullopt,
// never an exception.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace flipscope::read {

// The value at key of an object; a null value when j is no object or has no such key.
const nlohmann::json& Sub(const nlohmann::json& j, std::string_view key);
// The string at key, or fallback when absent or not a string.
std::string Str(const nlohmann::json& j, std::string_view key, std::string_view fallback = "");
// The number at key (a boolean reads as 1 or 0); nullopt when absent or of another type.
std::optional<double> Num(const nlohmann::json& j, std::string_view key);
// Num clamped to int; fallback when absent, mistyped or NaN.
int Int(const nlohmann::json& j, std::string_view key, int fallback);
// The number at a JSON pointer below j ("overall/flip_rate"); nullopt when absent or not a number.
std::optional<double> NumAt(const nlohmann::json& j, const std::string& pointer);
// The interval [lo, hi] at key, when it is an array of two numbers.
std::optional<std::array<double, 2>> Interval2(const nlohmann::json& j, std::string_view key);

// Whether the number v is a value of the arithmetic type T: for an integer type, a value in its
// range (a float is truncated; NaN, infinities and out-of-range values are not, since converting
// them is undefined).
template <typename T>
bool Fits(const nlohmann::json& v) {
  if (!v.is_number()) return false;
  if constexpr (std::is_integral_v<T>) {
    using Lim = std::numeric_limits<T>;
    if (v.is_number_float()) {
      const double d = v.get<double>();
      // double(Lim::max()) may round up to 2^bits: compare with <, against the power of two.
      return d >= double(Lim::min()) && d < 2.0 * double(Lim::max() / 2 + 1);
    }
    if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(Lim::max());
    const int64_t i = v.get<int64_t>();
    return i >= 0 ? uint64_t(i) <= uint64_t(Lim::max()) : Lim::is_signed && i >= int64_t(Lim::min());
  }
  return true;
}
// The value v when it has type T (bool, std::string or a number that Fits), else nullopt.
template <typename T>
std::optional<T> As(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>)
    return v.is_boolean() ? std::optional<T>(v.get<bool>()) : std::nullopt;
  else if constexpr (std::is_same_v<T, std::string>)
    return v.is_string() ? std::optional<T>(v.get<std::string>()) : std::nullopt;
  else
    return Fits<T>(v) ? std::optional<T>(v.get<T>()) : std::nullopt;
}
// The value at key when it has type T (bool, std::string or a number that Fits), else fallback.
template <typename T>
T Get(const nlohmann::json& j, std::string_view key, T fallback) {
  return As<T>(Sub(j, key)).value_or(fallback);
}
// The value at key when it has type T (bool, std::string or a number that Fits), else nullopt.
template <typename T>
std::optional<T> Opt(const nlohmann::json& j, std::string_view key) {
  return As<T>(Sub(j, key));
}
// The elements of the array at key that have type T (as As reads them); the others are left out.
template <typename T>
std::vector<T> Values(const nlohmann::json& j, std::string_view key) {
  std::vector<T> out;
  const nlohmann::json& a = Sub(j, key);
  if (a.is_array())
    for (const nlohmann::json& e : a)
      if (auto v = As<T>(e)) out.push_back(std::move(*v));
  return out;
}
// Each element of the array j (none when j is not one), read by from.
template <typename T, typename From>
std::vector<T> Each(const nlohmann::json& j, From from) {
  std::vector<T> out;
  if (j.is_array())
    for (const nlohmann::json& e : j) out.push_back(from(e));
  return out;
}
// Each item written by `write` (item -> JSON), as an array.
template <typename T, typename Write>
nlohmann::json ArrayOf(const std::vector<T>& items, Write write) {
  nlohmann::json a = nlohmann::json::array();
  for (const T& item : items) a.push_back(write(item));
  return a;
}
// j without the keys, an object in every case (a document's fields that a type does not own: kept
// as read and written back, for files of later versions).
nlohmann::json Without(const nlohmann::json& j, std::initializer_list<const char*> keys);
// Adds to the object j each field of extra that j does not hold (extra's fields as read).
void KeepExtra(nlohmann::json& j, const nlohmann::json& extra);

// Writes the optional's value under key when it has one (a field that files of some versions lack).
template <typename T>
void PutIf(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}
// An optional as JSON: the value, or null.
template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace flipscope::read
