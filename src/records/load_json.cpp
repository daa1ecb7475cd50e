// The JSON of an engine's load and served records (engine_records.h): the keys and number types
// the engines have always written, so that a manifest written from a record is the same bytes.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "records/engine_records.h"
#include "util/read.h"

namespace flipscope {

using nlohmann::json;

namespace {

json LoadJson(const LlamaLoadRecord& r) {
  json jobs = json::array(), batches = json::array();
  for (const FillerJobRecord& j : r.jobs)
    jobs.push_back({{"slot", j.slot},
                    {"job", j.job},
                    {"source", j.source},
                    {"offset", j.offset},
                    {"length", j.length},
                    {"generate", j.generate},
                    {"chunk", j.chunk},
                    {"warm", j.warm},
                    {"prefilled", j.prefilled},
                    {"generated", j.generated}});
  for (const LoadBatchRecord& b : r.batches) batches.push_back({b.decoding, b.measured, b.prefilling});
  return {{"fillers", r.fillers},
          {"seed", r.seed},
          {"cells_per_filler", r.cells_per_filler},
          {"context_batch", r.context_batch},
          {"jobs", jobs},
          {"jobs_total", r.jobs_total},
          {"batches", batches},
          {"batches_total", r.batches_total},
          {"batches_columns", {"decoding", "measured", "prefilling"}}};
}

json LoadJson(const ServerLoadRecord& r) {
  json requests = json::array();
  for (const FillerRequestRecord& q : r.requests)
    requests.push_back({{"slot", q.slot},
                        {"job", q.job},
                        {"source", q.source},
                        {"offset", q.offset},
                        {"length", q.length},
                        {"generate", q.generate},
                        {"start_s", q.start_s},
                        {"end_s", q.end_s},
                        {"status", q.status ? json(*q.status) : json(nullptr)}});
  return {{"fillers", r.fillers},
          {"seed", r.seed},
          {"cells_per_filler", r.cells_per_filler},
          {"measured_start_s", r.measured_start_s},
          {"measured_end_s", r.measured_end_s},
          {"overlapping", r.overlapping},
          {"requests", requests}};
}

}  // namespace

json ToJson(const EngineLoadRecord& r) {
  return std::visit([](const auto& x) { return LoadJson(x); }, r);
}

std::optional<EngineLoadRecord> EngineLoadRecordFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto i64 = [](const json& o, const char* key) { return read::Get<int64_t>(o, key, 0); };
  if (j.contains("jobs")) {
    LlamaLoadRecord r{.fillers = i64(j, "fillers"),
                      .seed = i64(j, "seed"),
                      .cells_per_filler = i64(j, "cells_per_filler"),
                      .context_batch = i64(j, "context_batch"),
                      .jobs = {},
                      .jobs_total = i64(j, "jobs_total"),
                      .batches = {},
                      .batches_total = i64(j, "batches_total")};
    r.jobs = read::Each<FillerJobRecord>(read::Sub(j, "jobs"), [&](const json& x) {
      return FillerJobRecord{.slot = i64(x, "slot"),
                             .job = i64(x, "job"),
                             .source = read::Str(x, "source"),
                             .offset = i64(x, "offset"),
                             .length = i64(x, "length"),
                             .generate = i64(x, "generate"),
                             .chunk = i64(x, "chunk"),
                             .warm = read::Get<bool>(x, "warm", false),
                             .prefilled = i64(x, "prefilled"),
                             .generated = i64(x, "generated")};
    });
    r.batches = read::Each<LoadBatchRecord>(read::Sub(j, "batches"), [](const json& b) {
      const auto at = [&](size_t i) { return b.is_array() && b.size() > i ? read::As<int64_t>(b[i]).value_or(0) : 0; };
      return LoadBatchRecord{at(0), at(1), at(2)};
    });
    return r;
  }
  ServerLoadRecord r{.fillers = i64(j, "fillers"),
                     .seed = i64(j, "seed"),
                     .cells_per_filler = i64(j, "cells_per_filler"),
                     .measured_start_s = read::Get<double>(j, "measured_start_s", 0),
                     .measured_end_s = read::Get<double>(j, "measured_end_s", 0),
                     .overlapping = i64(j, "overlapping"),
                     .requests = {}};
  r.requests = read::Each<FillerRequestRecord>(read::Sub(j, "requests"), [&](const json& x) {
    return FillerRequestRecord{.slot = i64(x, "slot"),
                               .job = i64(x, "job"),
                               .source = read::Str(x, "source"),
                               .offset = i64(x, "offset"),
                               .length = i64(x, "length"),
                               .generate = i64(x, "generate"),
                               .start_s = read::Get<double>(x, "start_s", 0),
                               .end_s = read::Get<double>(x, "end_s", 0),
                               .status = read::Opt<int64_t>(x, "status")};
  });
  return r;
}

std::optional<ServerServedRecord> ServerServedRecordFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto i64 = [](const json& o, const char* key) { return read::Get<int64_t>(o, key, 0); };
  const json &rows = read::Sub(j, "rows"), &proof = read::Sub(j, "proof"), &per_row = read::Sub(j, "per_row");
  ServerServedRecord r;
  r.mechanism = read::Str(j, "mechanism");
  r.api = read::Str(j, "api");
  r.requests = i64(j, "requests");
  r.generations = i64(j, "generations");
  r.generated_tokens = i64(j, "generated_tokens");
  r.generation_matched = i64(j, "generation_matched");
  r.not_served = i64(rows, "not_served");
  r.recomputed = read::Each<ServerServedRecord::Recomputed>(read::Sub(j, "recomputed"), [&](const json& x) {
    return ServerServedRecord::Recomputed{i64(x, "position"), i64(x, "cached"), i64(x, "computed")};
  });
  r.proof_compared = i64(proof, "compared");
  r.proof_identical = i64(proof, "identical");
  r.proof_differs = read::Values<int64_t>(proof, "differs");
  r.positions = read::Values<int64_t>(per_row, "positions");
  r.source = read::Values<std::string>(per_row, "source");
  r.cached = read::Values<int64_t>(per_row, "cached");
  r.computed = read::Values<int64_t>(per_row, "computed");
  r.seconds = read::Get<double>(j, "seconds", 0);
  r.requests_per_s = read::Get<double>(j, "requests_per_s", 0);
  return r;
}

json ToJson(const ServerServedRecord& r) {
  json recomputed = json::array();
  for (const auto& x : r.recomputed)
    recomputed.push_back({{"position", x.position}, {"cached", x.cached}, {"computed", x.computed}});
  auto from = [&](const char* source) { return std::count(r.source.begin(), r.source.end(), source); };
  return {
      {"mechanism", r.mechanism},
      {"api", r.api},
      {"requests", r.requests},
      {"generations", r.generations},
      {"generated_tokens", r.generated_tokens},
      {"generation_matched", r.generation_matched},
      {"rows",
       {{"kept", r.positions.size()},
        {"decode", from("decode")},
        {"generation", from("generation")},
        {"prompt", from("prompt")},
        {"recomputed", r.recomputed.size()},
        {"not_served", r.not_served}}},
      {"recomputed", recomputed},
      {"proof", {{"compared", r.proof_compared}, {"identical", r.proof_identical}, {"differs", r.proof_differs}}},
      {"per_row", {{"positions", r.positions}, {"source", r.source}, {"cached", r.cached}, {"computed", r.computed}}},
      {"seconds", r.seconds},
      {"requests_per_s", r.requests_per_s}};
}

}  // namespace flipscope
