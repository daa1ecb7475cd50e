// Output of comparisons: the terminal, Markdown and CSV views (the JSON document is
// results/comparison.cpp's). The table views share one set of row builders; only the final layout differs.
#include <fmt/format.h>

#include <cmath>

#include "compare/compare.h"
#include "util/util.h"

namespace flipscope {
namespace {

// ---- Text helpers ------------------------------------------------------------------------------

std::string Pct(double f) { return std::isnan(f) ? "-" : fmt::format("{:.3f}%", 100 * f); }
std::string Sci(double v) {
  if (std::isnan(v)) return "-";
  if (v == 0) return "0";
  return std::fabs(v) >= 1e-3 && std::fabs(v) < 1e4 ? fmt::format("{:.4f}", v) : fmt::format("{:.3e}", v);
}
std::string Prob(double p) { return std::isnan(p) ? "?" : fmt::format("{:.3f}", p); }
std::string CiText(std::pair<double, double> ci) { return fmt::format("[{}, {}]", Pct(ci.first), Pct(ci.second)); }

// A token's text made visible (VisibleToken), quoted; its id when there is no text.
std::string TokenText(int32_t id, const std::string& text, bool have_text) {
  if (!have_text) return fmt::format("#{}", id);
  return "'" + VisibleToken(text) + "'";
}
// A context's text on one line: line breaks and control characters escaped, spaces kept (it is
// running text, not a token whose edges matter).
std::string Visible(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '\n')
      out += "\\n";
    else if (ch == '\t')
      out += "\\t";
    else if (ch == '\r')
      out += "\\r";
    else if (static_cast<unsigned char>(ch) < 0x20)
      out += fmt::format("\\x{:02x}", int(ch));
    else
      out += ch;
  }
  return out;
}

using Rows = std::vector<std::vector<std::string>>;

// Columns padded to their widest cell (widths in UTF-8 code points).
std::string TextTable(const std::vector<std::string>& header, const Rows& rows) {
  auto width = [](const std::string& s) {
    return size_t(
        std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
  };
  std::vector<size_t> w(header.size());
  for (size_t i = 0; i < header.size(); ++i) w[i] = width(header[i]);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], width(r[i]));
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (size_t i = 0; i < r.size(); ++i) l += r[i] + std::string(i + 1 < r.size() ? w[i] - width(r[i]) + 2 : 0, ' ');
    out += l + "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
  return out;
}

std::string MarkdownTable(const std::vector<std::string>& header, const Rows& rows) {
  auto cell = [](std::string s) {
    std::string o;
    for (char ch : s) o += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return o;
  };
  std::string out = "|";
  for (const auto& h : header) out += " " + cell(h) + " |";
  out += "\n|";
  for (size_t i = 0; i < header.size(); ++i) out += " --- |";
  out += "\n";
  for (const auto& r : rows) {
    out += "|";
    for (const auto& c : r) out += " " + cell(c) + " |";
    out += "\n";
  }
  return out;
}

// ---- Row builders shared by the terminal and Markdown views ------------------------------------

std::string StoreText(const std::string& store, int32_t topk) {
  return store == "topk" ? fmt::format("top-{}", topk) : store;
}

std::vector<std::string> Summary(const Comparison& c) {
  const auto& o = c.overall;
  std::vector<std::string> lines;
  lines.push_back(fmt::format("base {} ({}), candidate {} ({})", c.base_path, StoreText(c.base_store, c.base_topk),
                              c.cand_path, StoreText(c.cand_store, c.cand_topk)));
  // The replay is not a llama.cpp flag but decides which computation is measured: always shown.
  auto ran = [](const std::string& flags, const std::string& replay) {
    return (flags.empty() ? "?" : flags) + " replay " + replay;
  };
  lines.push_back(fmt::format("ran with: base {}; candidate {}", ran(c.base_flags, c.base_replay),
                              ran(c.cand_flags, c.cand_replay)));
  if (c.kernel_paths_differ)
    lines.push_back(fmt::format("kernel paths differ: base {}; candidate {}", c.base_kernel_path, c.cand_kernel_path));
  lines.push_back(fmt::format("probes: {} compared ({} skipped in base, {} in candidate)", c.probes_compared,
                              c.probes_skipped_base, c.probes_skipped_cand));
  lines.push_back(fmt::format("bit-for-bit identical: {} of {} probes", c.bit_identical, c.probes_compared));
  lines.push_back(fmt::format("flips: {} of {} = {} (95% CI {}); confident {}, uncertain {}; same top-1 {}", o.flips,
                              o.probes, Pct(o.flip_rate), CiText(o.flip_rate_ci), o.confident_flips, o.uncertain_flips,
                              Pct(o.same_top1_rate)));
  std::string trunc = c.truncated ? " (truncated: tail-bucket estimate)" : "";
  for (auto [name, s] : {std::pair{"KL(base||cand)", &o.kl_base_cand}, {"KL(cand||base)", &o.kl_cand_base}})
    lines.push_back(fmt::format("{}{}: mean {} median {} p99 {} max {}", name, trunc, Sci(s->mean), Sci(s->median),
                                Sci(s->p99), Sci(s->max)));
  std::string pct;
  for (size_t i = 0; i < compare::kKlPercentiles.size(); ++i)
    pct += fmt::format("{}{:.1f}% {}", i ? ", " : "", compare::kKlPercentiles[i], Sci(o.kl_base_cand.percentiles[i]));
  lines.push_back("KL(base||cand) percentiles: " + pct);
  lines.push_back(fmt::format("JS mean {}; top-5 agreement {}; top-10 agreement {}", Sci(o.js_mean), Pct(o.top5_agree),
                              Pct(o.top10_agree)));
  return lines;
}

const std::vector<std::string> kWindowHeader = {"window", "positions", "probes",    "flips",  "flip rate",
                                                "95% CI", "KL mean",   "KL median", "KL p99", "KL max"};
Rows WindowRows(const Comparison& c) {
  Rows rows;
  for (const auto& w : c.windows)
    rows.push_back({std::to_string(w.index), fmt::format("{}-{}", w.begin, w.end - 1), std::to_string(w.probes),
                    std::to_string(w.flips), Pct(w.flip_rate), CiText(w.flip_rate_ci), Sci(w.kl_mean), Sci(w.kl_median),
                    Sci(w.kl_p99), Sci(w.kl_max)});
  return rows;
}

const std::vector<std::string> kFlipHeader = {"position",     "window", "span", "base token (p)", "cand token (p)",
                                              "p_cand(base)", "margin", "KL",   "class",          "context"};
// The flips table, at most `limit` rows.
Rows FlipRows(const Comparison& c, bool have_text, size_t limit) {
  Rows rows;
  for (const auto& f : c.flips) {
    if (rows.size() == limit) break;
    rows.push_back({std::to_string(f.position), std::to_string(f.window), f.span.empty() ? "-" : f.span,
                    fmt::format("{} ({})", TokenText(f.base_token, f.base_text, have_text), Prob(f.base_prob)),
                    fmt::format("{} ({})", TokenText(f.cand_token, f.cand_text, have_text), Prob(f.cand_prob)),
                    Prob(f.cand_prob_of_base_token), Sci(f.base_margin), Sci(f.kl), f.klass,
                    have_text ? "…" + Visible(f.context) : "-"});
  }
  return rows;
}

// RFC 4180 quoting.
std::string CsvCell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o = "\"";
  for (char ch : s) o += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return o + "\"";
}

}  // namespace

std::string RenderCompareTable(const std::vector<Comparison>& cs) {
  std::string out;
  for (const auto& c : cs) {
    if (!out.empty()) out += "\n";
    for (const auto& l : Summary(c)) out += l + "\n";
    out += "\n" + TextTable(kWindowHeader, WindowRows(c));
    // The terminal shows the first flips; --json / --md / --csv hold them all.
    constexpr size_t kTerminalFlips = 50;
    if (!c.flips.empty()) out += "\n" + TextTable(kFlipHeader, FlipRows(c, HaveText(c), kTerminalFlips));
    if (c.flips.size() > kTerminalFlips)
      out += fmt::format("... and {} more flips (all of them with --json or --md)\n", c.flips.size() - kTerminalFlips);
  }
  return out;
}

std::string RenderCompareMarkdown(const std::vector<Comparison>& cs) {
  std::string out;
  for (const auto& c : cs) {
    out += fmt::format("## {} vs {}\n\n", c.cand_path, c.base_path);
    for (const auto& l : Summary(c)) out += "- " + l + "\n";
    out += "\n" + MarkdownTable(kWindowHeader, WindowRows(c));
    if (!c.flips.empty()) out += "\n" + MarkdownTable(kFlipHeader, FlipRows(c, HaveText(c), c.flips.size()));
    out += "\n";
  }
  return out;
}

std::string RenderCompareCsv(const std::vector<Comparison>& cs) {
  std::string out = "base,cand,window,begin,end,probes,flips,flip_rate,ci_lo,ci_hi,kl_mean,kl_median,kl_p99,kl_max\n";
  auto row = [&](const Comparison& c, const std::string& window, int64_t begin, int64_t end, int64_t probes,
                 int64_t flips, double rate, std::pair<double, double> ci, double mean, double median, double p99,
                 double max) {
    out += fmt::format("{},{},{},{},{},{},{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g}\n",
                       CsvCell(c.base_path), CsvCell(c.cand_path), window, begin, end, probes, flips, rate, ci.first,
                       ci.second, mean, median, p99, max);
  };
  for (const auto& c : cs) {
    for (const auto& w : c.windows)
      row(c, std::to_string(w.index), w.begin, w.end, w.probes, w.flips, w.flip_rate, w.flip_rate_ci, w.kl_mean,
          w.kl_median, w.kl_p99, w.kl_max);
    const auto& o = c.overall;
    const auto& k = o.kl_base_cand;
    row(c, "all", c.windows.empty() ? 0 : c.windows.front().begin, c.windows.empty() ? 0 : c.windows.back().end,
        o.probes, o.flips, o.flip_rate, o.flip_rate_ci, k.mean, k.median, k.p99, k.max);
  }
  return out;
}

}  // namespace flipscope
