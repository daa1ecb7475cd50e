// Line charts as inline SVG: no scripts, no external resources, readable in print and in
// grey scale (every series has its own colour, dash pattern and marker shape).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope::report {

namespace {

// Okabe–Ito colours (distinguishable with the common colour-vision deficiencies).
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};
constexpr const char* kDashes[] = {"", "6 3", "2 3", "8 3 2 3", "12 4", "1 2", "4 4"};
constexpr int kStyles = 7;
// Series i: colour i mod 7, marker shape i mod 5, dash pattern shifted once every 7 series, so
// no two of the first 35 series look alike (series 0 and 7 share a colour, not a marker or dash).
const char* ColorOf(int i) { return kColors[i % kStyles]; }
const char* DashOf(int i) { return kDashes[(i + i / kStyles) % kStyles]; }

constexpr double kWidth = 760, kLeft = 72, kRight = 560, kTop = 40, kPlotBottom = 290, kHeight = 336;

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  bool zero_row = false;  // log axis: the bottom decade stands for values <= 0
  double Map(double v, double px_lo, double px_hi) const {
    double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return px_lo + std::clamp(t, 0.0, 1.0) * (px_hi - px_lo);
  }
};

// About n "nice" (1, 2, 5 x 10^k) tick values covering [lo, hi]; at most 4n, whatever the input.
std::vector<double> NiceTicks(double lo, double hi, int n) {
  double raw = (hi - lo) / n;
  if (!(raw > 0) || !std::isfinite(raw)) return {lo};
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * (raw / mag < 1.5 ? 1 : raw / mag < 3.5 ? 2 : raw / mag < 7.5 ? 5 : 10);
  std::vector<double> ticks;
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (int i = 0; i <= 4 * n; ++i) {  // by index: t += step can stall where step is below t's precision
    double t = first + i * step;
    if (t > hi + step * 1e-9) break;
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  if (ticks.empty()) ticks.push_back(lo);
  return ticks;
}

std::string TickLabel(double v, bool percent, bool log) {
  if (log) return fmt::format("1e{}", int(std::lround(std::log10(v))));
  if (percent) return fmt::format("{:g}%", v * 100.0);
  return fmt::format("{:g}", v);
}

// A marker of shape s centred at (x, y); hollow markers mark values off a log axis.
std::string Marker(int s, double x, double y, const std::string& color, bool hollow, const std::string& tip) {
  std::string fill = hollow ? "#fff" : color;
  std::string attrs = fmt::format(R"( fill="{}" stroke="{}" stroke-width="1.5")", fill, color);
  std::string shape;
  switch (s % 5) {
    case 0:
      shape = fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="4"{})", x, y, attrs);
      break;
    case 1:
      shape = fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="7" height="7"{})", x - 3.5, y - 3.5, attrs);
      break;
    case 2:
      shape = fmt::format(R"(<path d="M{:.1f} {:.1f}l4.5 8h-9z"{})", x, y - 5, attrs);
      break;
    case 3:
      shape = fmt::format(R"(<path d="M{:.1f} {:.1f}l5 5l-5 5l-5 -5z"{})", x, y - 5, attrs);
      break;
    default:
      shape = fmt::format(R"(<path d="M{:.1f} {:.1f}l8 8m0 -8l-8 8"{})", x - 4, y - 4, attrs);
  }
  return shape + "><title>" + HtmlEscape(tip) + "</title></" + shape.substr(1, shape.find(' ') - 1) + ">";
}

// The y axis over every series value (and the band), with room above. A log axis that must
// show values <= 0 gets one extra decade at the bottom, labelled "0".
Axis YAxis(const Chart& chart) {
  std::vector<double> vals;
  for (const ChartSeries& s : chart.series) vals.insert(vals.end(), s.y.begin(), s.y.end());
  if (chart.band) {
    vals.insert(vals.end(), chart.band->hi.begin(), chart.band->hi.end());
    vals.insert(vals.end(), chart.band->lo.begin(), chart.band->lo.end());
  }
  Axis a;
  a.log = chart.log_y;
  if (a.log) {
    double lo = INFINITY, hi = 0;
    for (double v : vals)
      if (v > 0 && std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (hi == 0) lo = 1e-6, hi = 1e-3;
    a.lo = std::pow(10.0, std::floor(std::log10(lo)));
    a.hi = std::pow(10.0, std::ceil(std::log10(hi)));
    if (a.hi <= a.lo) a.hi = a.lo * 10;
    for (const ChartSeries& s : chart.series)
      if (std::any_of(s.y.begin(), s.y.end(), [](double v) { return !(v > 0); })) a.zero_row = true;
    if (a.zero_row) a.lo /= 10;
    return a;
  }
  double hi = 0;
  for (double v : vals)
    if (std::isfinite(v)) hi = std::max(hi, v);
  a.lo = 0;
  if (hi <= 0) return a.hi = 1, a;
  std::vector<double> ticks = NiceTicks(0, hi * 1.05, 5);
  double step = ticks.size() > 1 ? ticks[1] - ticks[0] : hi;
  a.hi = std::ceil(hi * 1.05 / step) * step;  // the top is a tick
  return a;
}

Axis XAxis(const Chart& chart) {
  Axis a;
  a.lo = INFINITY, a.hi = -INFINITY;
  for (const ChartSeries& s : chart.series)
    for (double v : s.x) a.lo = std::min(a.lo, v), a.hi = std::max(a.hi, v);
  if (chart.band)
    for (double v : chart.band->x) a.lo = std::min(a.lo, v), a.hi = std::max(a.hi, v);
  if (!std::isfinite(a.lo)) a.lo = 0, a.hi = 1;
  if (a.hi <= a.lo) a.lo -= 1, a.hi += 1;
  // Positions start at 0 so the distance into the workload reads true.
  double pad = (a.hi - a.lo) * 0.04;
  a.lo = a.lo >= 0 ? 0.0 : a.lo - pad;
  a.hi += pad;
  return a;
}

std::string Grid(const Axis& x, const Axis& y, const Chart& chart) {
  std::string out = R"(<g class="grid" font-size="11" fill="#333">)";
  std::vector<double> yt;
  if (y.log) {
    int d0 = int(std::lround(std::log10(y.lo))), d1 = int(std::lround(std::log10(y.hi)));
    int every = std::max(1, (d1 - d0 + 5) / 6);
    for (int d = d0; d <= d1; d += every) yt.push_back(std::pow(10.0, d));
  } else {
    yt = NiceTicks(y.lo, y.hi, 5);
  }
  for (double t : yt) {
    double py = y.Map(t, kPlotBottom, kTop);
    out += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)", kLeft, kRight, py, py);
    std::string label = y.zero_row && t == yt.front() ? "0" : TickLabel(t, chart.y_percent, y.log);
    out += fmt::format(R"(<text x="{}" y="{:.1f}" text-anchor="end">{}</text>)", kLeft - 6, py + 4, HtmlEscape(label));
  }
  for (double t : NiceTicks(x.lo, x.hi, 7)) {
    double px = x.Map(t, kLeft, kRight);
    out += fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{}" y2="{}" stroke="#eee"/>)", px, px, kTop, kPlotBottom);
    out += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>)", px, kPlotBottom + 16,
                       HtmlEscape(TickLabel(t, false, false)));
  }
  out += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>)", kLeft, kTop,
                     kRight - kLeft, kPlotBottom - kTop);
  out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", (kLeft + kRight) / 2, kPlotBottom + 36,
                     HtmlEscape(chart.x_label));
  out += fmt::format(R"svg(<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>)svg",
                     (kTop + kPlotBottom) / 2, HtmlEscape(chart.y_label));
  return out + "</g>";
}

std::string Band(const ChartBand& b, const Axis& x, const Axis& y) {
  if (b.x.empty()) return "";
  std::string d;
  for (size_t i = 0; i < b.x.size(); ++i)
    d += fmt::format("{}{:.1f} {:.1f}", i ? " L" : "M", x.Map(b.x[i], kLeft, kRight),
                     y.Map(y.log ? std::max(b.hi[i], y.lo) : b.hi[i], kPlotBottom, kTop));
  for (size_t i = b.x.size(); i-- > 0;)
    d += fmt::format(" L{:.1f} {:.1f}", x.Map(b.x[i], kLeft, kRight),
                     y.Map(y.log ? std::max(b.lo[i], y.lo) : b.lo[i], kPlotBottom, kTop));
  // A single point still gets a visible band a few pixels wide.
  std::string stroke = b.x.size() == 1 ? R"( stroke="#bbb" stroke-width="8")" : "";
  return fmt::format(R"(<path class="band" d="{}Z" fill="#bbb" fill-opacity="0.45"{}><title>{}</title></path>)", d,
                     stroke, HtmlEscape(b.name));
}

std::string Series(const ChartSeries& s, int style, const Axis& x, const Axis& y) {
  const std::string color = ColorOf(style);
  std::string path, marks;
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    bool off = y.log && !(s.y[i] > 0);
    double px = x.Map(s.x[i], kLeft, kRight), py = off ? kPlotBottom : y.Map(s.y[i], kPlotBottom, kTop);
    path += fmt::format("{}{:.1f} {:.1f}", path.empty() ? "M" : " L", px, py);
    std::string tip = i < s.tips.size() ? s.tips[i] : fmt::format("{}: {:g}", s.name, s.y[i]);
    marks += Marker(style, px, py, color, off, tip);
  }
  const char* dashes = DashOf(style);
  std::string dash = dashes[0] ? fmt::format(R"( stroke-dasharray="{}")", dashes) : "";
  return fmt::format(R"(<g class="series"><path d="{}" fill="none" stroke="{}" stroke-width="2"{}/>{}</g>)", path,
                     color, dash, marks);
}

// At most n bytes of text, cut on a UTF-8 character boundary, with "…" when cut.
std::string Clip(const std::string& text, size_t n) {
  if (text.size() <= n) return text;
  size_t cut = n - 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "…";
}

std::string Legend(const Chart& chart) {
  std::string out = R"(<g class="legend" font-size="12" fill="#222">)";
  double y = kTop + 6;
  auto entry = [&](const std::string& swatch, const std::string& name) {
    out += swatch + fmt::format(R"(<text x="{}" y="{:.1f}">{}</text>)", kRight + 46, y + 4, HtmlEscape(Clip(name, 22)));
    y += 20;
  };
  for (size_t i = 0; i < chart.series.size(); ++i) {
    int s = int(i);
    std::string dash = DashOf(s)[0] ? fmt::format(R"( stroke-dasharray="{}")", DashOf(s)) : "";
    std::string line = fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="2"{}/>)",
                                   kRight + 12, kRight + 40, y, y, ColorOf(s), dash);
    entry(line + Marker(s, kRight + 26, y, ColorOf(s), false, chart.series[i].name), chart.series[i].name);
  }
  if (chart.band)
    entry(fmt::format(R"(<rect x="{}" y="{:.1f}" width="28" height="10" fill="#bbb" fill-opacity="0.6"/>)", kRight + 12,
                      y - 5),
          chart.band->name);
  return out + "</g>";
}

}  // namespace

std::string RenderSvgChart(const Chart& chart) {
  const std::string id = chart.id.empty() ? "chart" : chart.id;
  Axis x = XAxis(chart), y = YAxis(chart);
  std::string out =
      fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {} {}" role="img" )"
                  R"(aria-labelledby="{}-t {}-d" font-family="system-ui, sans-serif">)",
                  kWidth, kHeight, id, id);
  out += fmt::format(R"(<title id="{}-t">{}</title><desc id="{}-d">{}</desc>)", id, HtmlEscape(chart.title), id,
                     HtmlEscape(chart.description));
  out += fmt::format(R"(<text x="{}" y="22" font-size="14" font-weight="600" fill="#111">{}</text>)", kLeft,
                     HtmlEscape(chart.title));
  out += Grid(x, y, chart);
  if (chart.band) out += Band(*chart.band, x, y);
  for (size_t i = 0; i < chart.series.size(); ++i) out += Series(chart.series[i], int(i), x, y);
  out += Legend(chart);
  return out + "</svg>";
}

}  // namespace flipscope::report
