// Progress bar, clocks and small formatting helpers.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <ctime>

#include "util/util.h"

namespace flipscope {

double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void StderrLine(std::string_view line) { fmt::print(stderr, "{}\n", line); }

namespace {
// Whether bars are drawn at all: on a terminal, unless FLIPSCOPE_NO_PROGRESS is set.
bool BarsOnStderr() { return ::isatty(STDERR_FILENO) && !std::getenv("FLIPSCOPE_NO_PROGRESS"); }
}  // namespace

std::string RateText(double per_second) {
  return per_second >= 100 ? fmt::format("{:.0f}", per_second) : fmt::format("{:.1f}", per_second);
}

Progress::Progress(std::string label, uint64_t total, std::string unit)
    : log_(Log::Quiet()),
      label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      enabled_(BarsOnStderr()),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::Progress(const Log& log, std::string label, uint64_t total, std::string unit)
    : Progress(std::move(label), total, std::move(unit)) {
  log_ = log;
  logged_ = true;
  enabled_ = enabled_ && log.bars;
  // Without a bar nothing else would say that a long stage has begun.
  if (!enabled_) log_.Info(fmt::format("{}: started, {} {}", label_, total_, unit_));
}

Progress::~Progress() { Finish(); }

double Progress::Seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::Note(std::string note) { note_ = std::move(note); }

void Progress::Update(uint64_t done) {
  done_ = done;
  if (!enabled_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  double secs = std::chrono::duration<double>(now - start_).count();
  double rate = secs > 0 ? double(done) / secs : 0;
  double eta = rate > 0 ? double(total_ - std::min(done, total_)) / rate : 0;
  int width = 30;
  int filled = total_ ? int(double(width) * double(done) / double(total_)) : width;
  std::string bar(size_t(std::min(filled, width)), '#');
  bar.resize(size_t(width), '.');
  fmt::print(stderr, "\r{} [{}] {}/{} {} {} {}/s ETA {:.0f}s{}\033[K", label_, bar, done, total_, unit_, RateText(rate),
             unit_, eta, note_.empty() ? "" : "  " + note_);
  std::fflush(stderr);
}

std::string Progress::EndLine() const {
  const double secs = Seconds();
  const std::string amount =
      done_ < total_ ? fmt::format("stopped at {} of {} {}", done_, total_, unit_) : fmt::format("{} {}", done_, unit_);
  return fmt::format("{}: {} in {:.1f} s ({} {}/s){}", label_, amount, secs,
                     RateText(secs > 0 ? double(done_) / secs : 0), unit_, note_.empty() ? "" : ", " + note_);
}

void Progress::Finish() {
  if (finished_) return;
  if (enabled_) {
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  if (logged_) log_.Info(EndLine());
  finished_ = true;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (std::fabs(bytes) >= 1024 && i < 4) {
    bytes /= 1024;
    ++i;
  }
  return i == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, units[i]);
}

Result<uint64_t> ParseBytes(std::string_view text) {
  std::string s(text);
  size_t idx = 0;
  double v = 0;
  try {
    v = std::stod(s, &idx);
  } catch (...) {
    return Status::Error("'" + s + "' is not a size (e.g. 8GiB)");
  }
  std::string unit = s.substr(idx);
  double mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "KB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MiB" || unit == "MB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB" || unit == "GB")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TiB" || unit == "TB")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else
    return Status::Error("'" + s + "': unknown size unit '" + unit + "' (use KiB, MiB, GiB)");
  if (v < 0) return Status::Error("'" + s + "': size must not be negative");
  return uint64_t(v * mult);
}

std::string VisibleToken(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == ' ')
      out += "␠";
    else if (c == '\n')
      out += "↵";
    else if (c == '\t')
      out += "⇥";
    else if (c == '\r')
      out += "␍";
    else if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string UtcNowIso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace flipscope
