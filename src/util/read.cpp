// The tolerant readers of outside JSON (results.json, a manifest's records).
#include "util/read.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace flipscope::read {

using nlohmann::json;

const json& Sub(const json& j, std::string_view key) {
  static const json null;
  if (!j.is_object()) return null;
  auto it = j.find(key);
  return it == j.end() ? null : *it;
}

std::string Str(const json& j, std::string_view key, std::string_view fallback) {
  const json& v = Sub(j, key);
  return v.is_string() ? v.get<std::string>() : std::string(fallback);
}

std::optional<double> Num(const json& j, std::string_view key) {
  const json& v = Sub(j, key);
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return std::nullopt;
}

int Int(const json& j, std::string_view key, int fallback) {
  auto v = Num(j, key);
  if (!v || std::isnan(*v)) return fallback;
  return int(std::clamp(*v, double(std::numeric_limits<int>::min()), double(std::numeric_limits<int>::max())));
}

std::optional<double> NumAt(const json& j, const std::string& pointer) {
  try {
    const json& v = j.at(json::json_pointer("/" + pointer));
    if (v.is_number()) return v.get<double>();
  } catch (const json::exception&) {
    // absent or not addressable: no value
  }
  return std::nullopt;
}

std::optional<std::array<double, 2>> Interval2(const json& j, std::string_view key) {
  const json& v = Sub(j, key);
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number()) return std::nullopt;
  return std::array<double, 2>{v[0].get<double>(), v[1].get<double>()};
}

json Without(const json& j, std::initializer_list<const char*> keys) {
  json out = j.is_object() ? j : json::object();
  for (const char* k : keys) out.erase(k);
  return out;
}

void KeepExtra(json& j, const json& extra) {
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) j.emplace(it.key(), *it);
}

}  // namespace flipscope::read
