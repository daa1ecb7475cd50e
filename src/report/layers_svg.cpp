// The layers charts: small multiples of the relative difference against the layer (attention
// output, MLP output, residual stream), one thin line per flip and the median bold; a flip's own
// chart in its detail; and the standalone page `flipscope layers --html` writes.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope::report {
namespace {

struct Panel {
  size_t part;  // the layer point (kLayerPartKeys order)
  const char* title;
};
constexpr Panel kPanels[] = {{0, "attention output"}, {2, "MLP output"}, {3, "residual stream after the layer"}};
constexpr double kPanelW = 236, kPanelH = 190, kPanelGap = 20, kPanelLeft = 58, kPanelTop = 44, kPanelBottom = 36;

// One line's values per layer for one panel.
std::vector<double> LineOf(const LayersFlip& flip, size_t part) {
  std::vector<double> v;
  for (const auto& l : flip.layers) v.push_back(l[part].rel);
  return v;
}

// Decades lo..hi covering every positive value; values <= 0 are drawn on the bottom edge.
std::pair<int, int> Decades(const std::vector<LayersFlip>& flips) {
  double lo = INFINITY, hi = 0;
  for (const LayersFlip& f : flips)
    for (const Panel& p : kPanels)
      for (double v : LineOf(f, p.part))
        if (v > 0 && std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (hi == 0) return {-6, -3};
  int d0 = int(std::floor(std::log10(lo))), d1 = int(std::ceil(std::log10(hi)));
  return {std::max(d0, d1 - 9), std::max(d1, d0 + 1)};  // at most nine decades
}

struct Frame {
  double x0, n_layer;
  int d0, d1;
  double X(double layer) const { return x0 + (n_layer > 1 ? layer / (n_layer - 1) : 0.5) * kPanelW; }
  double Y(double v) const {
    double t = v > 0 ? (std::log10(v) - d0) / double(d1 - d0) : 0;
    return kPanelTop + kPanelH - std::clamp(t, 0.0, 1.0) * kPanelH;
  }
};

std::string Path(const Frame& f, const std::vector<double>& v) {
  std::string d;
  for (size_t i = 0; i < v.size(); ++i) d += fmt::format("{}{:.1f} {:.1f}", i ? " L" : "M", f.X(double(i)), f.Y(v[i]));
  return d;
}

std::string Axes(const Frame& f, const Panel& p) {
  std::string out =
      fmt::format(R"(<g font-size="10" fill="#333"><text x="{:.1f}" y="{}" font-size="12" font-weight="600">{}</text>)",
                  f.x0, kPanelTop - 8, HtmlEscape(p.title));
  for (int d = f.d0; d <= f.d1; ++d) {
    double y = f.Y(std::pow(10.0, d));
    out += fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="#e4e4e4"/>)", f.x0,
                       f.x0 + kPanelW, y, y);
    if (f.x0 == kPanelLeft)
      out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">1e{}</text>)", f.x0 - 5, y + 3, d);
  }
  int step = std::max(1, int(f.n_layer) / 6);
  for (int l = 0; l < int(f.n_layer); l += step)
    out += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>)", f.X(l), kPanelTop + kPanelH + 14, l);
  out += fmt::format(R"(<rect x="{:.1f}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>)", f.x0, kPanelTop,
                     kPanelW, kPanelH);
  return out + fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle">layer</text></g>)", f.x0 + kPanelW / 2,
                           kPanelTop + kPanelH + 30);
}

// The per-layer median over flips of one panel's values.
std::vector<double> MedianLine(const std::vector<LayersFlip>& flips, size_t part, size_t n_layer) {
  std::vector<double> med;
  for (size_t l = 0; l < n_layer; ++l) {
    std::vector<double> v;
    for (const LayersFlip& f : flips)
      if (f.reproduced) v.push_back(l < f.layers.size() ? f.layers[l][part].rel : 0.0);
    std::sort(v.begin(), v.end());
    med.push_back(v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
  }
  return med;
}

// Small multiples over `flips` (one thin line each); with bold_median the median is drawn bold.
std::string Multiples(const std::string& id, const std::string& title, const std::string& desc,
                      const std::vector<LayersFlip>& flips, size_t n_layer, bool bold_median) {
  auto [d0, d1] = Decades(flips);
  const double width = kPanelLeft + 3 * kPanelW + 2 * kPanelGap + 12, height = kPanelTop + kPanelH + kPanelBottom + 8;
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {} {}" role="img" aria-labelledby="{}-t {}-d" )"
      R"(font-family="system-ui, sans-serif"><title id="{}-t">{}</title><desc id="{}-d">{}</desc>)",
      width, height, id, id, id, HtmlEscape(title), id, HtmlEscape(desc));
  out += fmt::format(R"(<text x="{}" y="16" font-size="13" font-weight="600" fill="#111">{}</text>)", kPanelLeft,
                     HtmlEscape(title));
  out += fmt::format(
      R"svg(<text transform="translate(12 {}) rotate(-90)" font-size="10" text-anchor="middle">relative difference</text>)svg",
      kPanelTop + kPanelH / 2);
  for (int i = 0; i < 3; ++i) {
    Frame f{kPanelLeft + i * (kPanelW + kPanelGap), double(n_layer), d0, d1};
    out += Axes(f, kPanels[i]);
    const char* thin = bold_median ? R"(stroke="#0072B2" stroke-opacity="0.35" stroke-width="0.8")"
                                   : R"(stroke="#D55E00" stroke-width="1.8")";
    out += "<g class=\"series\">";  // one panel's lines (the report checker counts series)
    for (const LayersFlip& fl : flips)
      out += fmt::format(R"(<path d="{}" fill="none" {}><title>position {}</title></path>)",
                         Path(f, LineOf(fl, kPanels[i].part)), thin, fl.position);
    if (bold_median)
      out += fmt::format(R"(<path d="{}" fill="none" stroke="#000" stroke-width="2.6"><title>median</title></path>)",
                         Path(f, MedianLine(flips, kPanels[i].part, n_layer)));
    out += "</g>";
  }
  return out + "</svg>";
}

// "; " and how far the recomputations kept to their captures, where drift was allowed; "" otherwise.
std::string DriftClause(const LayersResult& layers) {
  return layers.allow_drift ? "; " + ReproductionText(layers) : "";
}

std::string Label(const LayersResult& layers) {
  return fmt::format("{} against {}", Or(layers.cand.flags), Or(layers.base.flags));
}

}  // namespace

std::string FlipsOf(const LayersResult& layers) {
  // A document that does not say how many it compared compared the flips it lists.
  const int64_t shown = layers.flips_compared > 0 ? layers.flips_compared : int64_t(layers.flips.size());
  const int64_t available = std::max(layers.flips_available, shown);
  return available > shown ? fmt::format("{} of {} flips", shown, available) : fmt::format("{} flips", shown);
}

std::string FlipLayersLine(const LayersFlip& f) {
  std::string born = !f.reproduced ? "not reproduced by the recomputation, not attributed"
                     : f.birth     ? fmt::format("born in layer {} {}", f.birth->layer, f.birth->block)
                                   : "no jump";
  if (f.largest_jump)
    born += fmt::format(", grows most in layer {} {} (x{:.3g})", f.largest_jump->layer, f.largest_jump->block,
                        f.largest_jump_factor);
  return fmt::format("position {}: {} &rarr; {}, {}, logits relative difference {:.3g}", f.position,
                     HtmlEscape(VisibleToken(f.base_text.value_or(""))),
                     HtmlEscape(VisibleToken(f.cand_text.value_or(""))), HtmlEscape(born), f.logits.rel);
}

std::string HtmlLayersSection(const ExperimentResults& r) {
  if (!r.layers || r.layers->empty()) return "";
  const std::vector<LayersRecord>& all = *r.layers;
  std::string out =
      "<section id=\"layers\"><h2>Where the flips are born</h2><p>Each flip recomputed in both "
      "configurations, every layer's attention output, MLP output and residual stream compared at the "
      "flip's position (relative difference, log scale): one thin line per flip, the median bold "
      "(docs/layers.md). A flip is born where the residual difference first jumps past the level the "
      "layers before it set.</p>";
  for (const LayersRecord& e : all) {
    const std::string name = Or(e.config);
    if (!e.result) {
      out += fmt::format("<p><strong>{}</strong>: not looked into ({}).</p>", HtmlEscape(name),
                         HtmlEscape(e.skipped.value_or(e.error.value_or("no result"))));
      continue;
    }
    const LayersResult& l = *e.result;
    const LayersSummary s = Summarize(l);
    out += fmt::format(
        "<h3>{}</h3><p>{}: born in attention {}, in the MLP {}, at the embedding {}, no jump {}; "
        "median relative difference of the logits {}{}.</p>",
        HtmlEscape(name), FlipsOf(l), s.born_attention, s.born_mlp, s.born_embedding, s.born_none,
        Small(s.median_logits_rel), HtmlEscape(DriftClause(l)));
    const std::string id = "layers-" + std::to_string(&e - &all[0]);
    out += RenderLayersChart(l, id);
    for (size_t i = 0; i < l.flips.size(); ++i)
      out += fmt::format("<details id=\"{}-p{}\"><summary>{}</summary>", id, l.flips[i].position,
                         FlipLayersLine(l.flips[i])) +
             RenderFlipLayersChart(l, i, id + "-") + "</details>";
  }
  return out + "</section>";
}

std::string RenderLayersChart(const LayersResult& layers, const std::string& id) {
  const std::vector<LayersFlip>& flips = layers.flips;
  const size_t n_layer = size_t(std::max(layers.n_layer, 0));
  std::string desc = fmt::format(
      "{}: {}; per layer the norm of the difference over the norm, log scale; one "
      "thin line per flip, the median bold",
      Label(layers), FlipsOf(layers));
  std::string title = fmt::format("{}: one thin line each, the median bold", FlipsOf(layers));
  return Multiples(id, title, desc, flips, n_layer, true);
}

std::string RenderFlipLayersChart(const LayersResult& layers, size_t i, const std::string& id_prefix) {
  const LayersFlip& flip = layers.flips[i];
  const size_t n_layer = size_t(std::max(layers.n_layer, 0));
  std::string title = fmt::format("position {}", flip.position);
  return Multiples(fmt::format("{}flip{}", id_prefix, i), title, "this flip's relative difference per layer", {flip},
                   n_layer, false);
}

}  // namespace flipscope::report

namespace flipscope {

using namespace report;  // the page is made of the report's layer charts

std::string RenderLayersHtml(const LayersResult& layers) {
  const LayersSummary s = Summarize(layers);
  std::string html =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>flipscope layers</title><style>"
      "body{font-family:system-ui,sans-serif;max-width:900px;margin:2em auto;color:#111}"
      "svg{width:100%;height:auto}td,th{padding:2px 10px;text-align:right}</style></head><body>";
  html += "<h1>Where the flips are born</h1><p>" + HtmlEscape(Label(layers)) + "</p>";
  html +=
      fmt::format("<p>{}; born in attention {}, in the MLP {}, at the embedding {}, no jump {}{}.</p>", FlipsOf(layers),
                  s.born_attention, s.born_mlp, s.born_embedding, s.born_none, HtmlEscape(DriftClause(layers)));
  html += fmt::format(
      "<p>After the birth, the largest growth of the difference is in attention for {} flips, in the "
      "MLP for {}.</p>",
      s.jump_attention, s.jump_mlp);
  html += RenderLayersChart(layers);
  html += "<table><tr><th>layer</th><th>born in attention</th><th>born in the MLP</th></tr>";
  for (size_t l = 0; l < s.birth_layers.size(); ++l)
    if (s.birth_layers[l][0] + s.birth_layers[l][1] > 0)
      html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>", l, s.birth_layers[l][0], s.birth_layers[l][1]);
  html += "</table><h2>Each flip</h2>";
  for (size_t i = 0; i < layers.flips.size(); ++i)
    html += "<details><summary>" + FlipLayersLine(layers.flips[i]) + "</summary>" + RenderFlipLayersChart(layers, i) +
            "</details>";
  return html + "</body></html>\n";
}

}  // namespace flipscope
