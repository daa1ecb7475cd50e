// `doctor` report: severities, JSON and the terminal listing.
#include <fmt/format.h>

#include <algorithm>

#include "checkpoint/doctor.h"
#include "util/names.h"

namespace flipscope {

// Severity names as reports and JSON spell them.
template <>
struct Names<Severity> {
  static constexpr std::pair<Severity, const char*> v[] = {
      {Severity::kOk, "ok"}, {Severity::kInfo, "info"}, {Severity::kWarn, "warn"}, {Severity::kError, "error"}};
};

const char* SeverityName(Severity s) { return NameOf(s).data(); }

const Finding* DoctorReport::Find(const std::string& check) const {
  for (const auto& f : findings)
    if (f.check == check) return &f;
  return nullptr;
}

int DoctorReport::ExitCode() const {
  bool error =
      std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.severity == Severity::kError; });
  return error ? 2 : 0;
}

nlohmann::json DoctorReport::ToJson() const {
  nlohmann::json j = {{"path", path}, {"exit_code", ExitCode()}, {"findings", nlohmann::json::array()}};
  for (const auto& f : findings)
    j["findings"].push_back(
        {{"check", f.check}, {"severity", SeverityName(f.severity)}, {"message", f.message}, {"fix", f.fix}});
  return j;
}

std::string DoctorReport::ToText() const {
  std::string s = path + "\n";
  int count[4] = {0, 0, 0, 0};
  for (const auto& f : findings) {
    ++count[int(f.severity)];
    s += fmt::format("  {:<6}{:<16}{}\n", SeverityName(f.severity), f.check, f.message);
    if (!f.fix.empty() && f.severity != Severity::kOk) s += fmt::format("  {:<22}fix: {}\n", "", f.fix);
  }
  s += fmt::format("{} error(s), {} warning(s), {} note(s), {} ok\n", count[3], count[2], count[1], count[0]);
  return s;
}

}  // namespace flipscope
