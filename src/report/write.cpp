// results.csv and writing the report files.
#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope {

using nlohmann::json;

namespace {

// One CSV field (RFC 4180): quoted when it holds a comma, quote, CR or LF; quotes doubled.
std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A JSON scalar as a CSV value: numbers at full precision, booleans as true/false, else empty.
std::string CsvValue(const json& v) {
  if (v.is_number() || v.is_boolean()) return v.dump();
  if (v.is_string()) return v.get<std::string>();
  return "";
}

std::string CsvNumber(std::optional<double> v) { return v ? fmt::format("{}", *v) : ""; }

// results.csv's columns, in order (docs/report.md).
// clang-format off
constexpr const char* kCsvColumns[] = {
    "rank",          "config",           "status",          "reason",          "description",
    "flags",         "repeats",          "median_flip_rate", "flip_rate_ci_lo", "flip_rate_ci_hi",
    "flips",         "probes",           "confident_flips", "kl_mean",         "kl_p99",
    "kl_max",        "bit_identical",    "bit_identical_of", "above_floor",    "kv_bytes_per_token",
    "kv_bytes_at_context", "baseline",   "recommended",     "replay"};
// clang-format on

// The rows of results.csv: the configurations, then under replay = "both" the served twins, whose
// figures are against the served baseline (results.served, seen as results of their own:
// `served`, which must outlive the rows). The rank goes with the figures it rests on: on the twin's
// row where the recipe ranked by served replay.
std::vector<report::ConfigRow> CsvRows(const ExperimentResults& r, const ExperimentResults& served) {
  std::vector<report::ConfigRow> rows = report::RankedConfigs(r);
  std::map<std::string, int> twin_rank;
  for (report::ConfigRow& row : rows)
    if (row.twin_summary) twin_rank[ServedName(row.name)] = row.rank, row.rank = 0;
  if (r.served)
    for (report::ConfigRow& row : report::RankedConfigs(served)) {
      auto it = twin_rank.find(row.name);
      row.rank = it == twin_rank.end() ? 0 : it->second, row.is_recommended = false;
      rows.push_back(std::move(row));
    }
  return rows;
}

// One configuration's cells, in kCsvColumns' order.
std::vector<std::string> CsvCells(const report::ConfigRow& row) {
  // A summary field as the document holds it (numbers at full precision), "" without a summary.
  auto field = [&](auto get) { return row.summary ? CsvValue(json(get(*row.summary))) : std::string(); };
  const auto& ci = row.summary ? row.summary->flip_rate_ci : std::nullopt;
  static const json kNone;
  const json& cfg = row.config ? row.config->fields : kNone;
  return {
      row.rank ? std::to_string(row.rank) : "",
      row.name,
      row.status,
      row.reason,
      row.description,
      row.flags,
      row.config && row.config->repeats ? CsvValue(json(*row.config->repeats)) : CsvValue(report::Sub(cfg, "repeats")),
      field([](const SummaryRow& s) { return s.median_flip_rate; }),
      ci ? CsvValue(json((*ci)[0])) : "",
      ci ? CsvValue(json((*ci)[1])) : "",
      field([](const SummaryRow& s) { return s.flips; }),
      field([](const SummaryRow& s) { return s.probes; }),
      field([](const SummaryRow& s) { return s.confident_flips; }),
      field([](const SummaryRow& s) { return s.kl_mean; }),
      field([](const SummaryRow& s) { return s.kl_p99; }),
      field([](const SummaryRow& s) { return s.kl_max; }),
      field([](const SummaryRow& s) { return s.bit_identical; }),
      field([](const SummaryRow& s) { return s.bit_identical_of; }),
      row.summary && row.summary->above_floor ? CsvValue(json(*row.summary->above_floor)) : "",
      CsvNumber(row.kv_bytes_per_token),
      CsvNumber(row.kv_bytes_at_context),
      row.is_baseline ? "true" : "false",
      row.is_recommended ? "true" : "false",
      std::string(NameOf(row.replay))};
}

// One CSV line (RFC 4180, CRLF).
std::string CsvLine(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) line += (i ? "," : "") + CsvField(cells[i]);
  return line + "\r\n";
}

}  // namespace

std::string RenderCsv(const ExperimentResults& r) {
  std::string out = CsvLine(std::vector<std::string>(std::begin(kCsvColumns), std::end(kCsvColumns)));
  ExperimentResults served;  // the served twins as results of their own: their baseline and measurements
  if (r.served) served.baseline = r.served->baseline, served.measured = r.served->measured;
  for (const report::ConfigRow& row : CsvRows(r, served)) out += CsvLine(CsvCells(row));
  return out;
}

Status WriteReport(const ExperimentResults& results, const std::string& outdir) {
  std::error_code ec;
  std::filesystem::create_directories(outdir, ec);
  if (ec) return Status::Error(outdir + ": cannot create the folder: " + ec.message());
  // Render everything first, so a rendering problem never leaves a partial set of files.
  std::vector<std::pair<std::string, std::string>> files;
  try {
    files = {{"report.html", RenderHtml(results)},
             {"report.md", RenderMarkdown(results)},
             {"results.csv", RenderCsv(results)}};
  } catch (const std::exception& e) {  // the accessors check types; this guards the unforeseen
    return Status::Error(outdir + ": cannot render the report: " + e.what());
  }
  for (const auto& [name, text] : files) FS_RETURN_IF_ERROR(WriteFileAtomic(outdir + "/" + name, text));
  return Status::Ok();
}

}  // namespace flipscope
