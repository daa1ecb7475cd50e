// The results document to JSON and back. Reading is tolerant (results.json is outside input): a
// missing part stays empty, and a typed field whose value has another type is kept as it was in
// the part's raw fields, so that writing gives back what was read.
#include "results/experiment_results.h"

#include <algorithm>
#include <cmath>

#include "util/read.h"
#include "util/util.h"

namespace flipscope {

using nlohmann::json;

namespace {

// The objects of an array at key, each read with `read`; none when it is no array.
template <typename T, typename ReadFn>
std::vector<T> ObjectsAt(const json& j, const char* key, ReadFn read) {
  std::vector<T> out;
  const json& a = read::Sub(j, key);
  if (!a.is_array()) return out;
  for (const json& e : a)
    if (e.is_object()) out.push_back(read(e));
  return out;
}

// Each element's ToJson as an array.
template <typename T>
json ArrayOf(const std::vector<T>& items) {
  return read::ArrayOf(items, [](const T& item) { return item.ToJson(); });
}

// Moves fields[key] into out when `is` accepts the value's JSON type exactly, so that writing
// gives back the same bytes; a value of another type stays in fields.
template <typename T, typename Is>
void Take(json& fields, const char* key, std::optional<T>& out, Is is) {
  auto it = fields.find(key);
  if (it == fields.end() || !is(*it)) return;
  out = it->template get<T>();
  fields.erase(it);
}
bool IsString(const json& v) { return v.is_string(); }
bool IsInteger(const json& v) { return v.is_number_integer(); }
bool IsUnsigned(const json& v) { return v.is_number_unsigned(); }
bool IsFloat(const json& v) { return v.is_number_float(); }
bool IsBool(const json& v) { return v.is_boolean(); }
// An array whose every element `is` accepts.
template <typename Is>
auto ListOf(Is is) {
  return [is](const json& v) { return v.is_array() && std::all_of(v.begin(), v.end(), is); };
}

// The entry's typed facts into j (ConfigEntry::ToJson).
void WriteFacts(const ConfigEntry& e, json& j) {
  read::PutIf(j, "description", e.description), read::PutIf(j, "flags", e.flags);
  read::PutIf(j, "repeats", e.repeats), read::PutIf(j, "capture_seconds", e.capture_seconds);
  read::PutIf(j, "reused", e.reused), read::PutIf(j, "kv_bytes_per_token", e.kv_bytes_per_token);
  read::PutIf(j, "model_file_size", e.model_file_size);
  if (e.knobs) j["knobs"] = e.knobs->record;
  if (e.engine) j["engine"] = e.engine->record;
  read::PutIf(j, "changes", e.changes), read::PutIf(j, "timings", e.timings);
  if (e.kv_bytes_unknown && !e.kv_bytes_per_token) j["kv_bytes_per_token"] = nullptr;
  if (e.contradictions) j["contradictions"] = ArrayOf(*e.contradictions);
}

// A contradictions list whose every entry is an object naming its knob.
bool IsContradictions(const json& v) {
  return ListOf([](const json& c) { return c.is_object() && c.contains("knob") && c["knob"].is_string(); })(v);
}

// The entry's typed facts out of its fields (ConfigEntry::FromJson).
void TakeFacts(ConfigEntry& e) {
  Take(e.fields, "description", e.description, IsString);
  Take(e.fields, "flags", e.flags, IsString);
  Take(e.fields, "repeats", e.repeats, IsInteger);
  Take(e.fields, "capture_seconds", e.capture_seconds, ListOf(IsFloat));
  Take(e.fields, "reused", e.reused, ListOf(IsBool));
  Take(e.fields, "kv_bytes_per_token", e.kv_bytes_per_token, IsFloat);
  Take(e.fields, "model_file_size", e.model_file_size, IsUnsigned);
  auto is_object = [](const json& v) { return v.is_object(); };
  Take(e.fields, "changes", e.changes, is_object);
  Take(e.fields, "timings", e.timings, is_object);
  if (auto it = e.fields.find("kv_bytes_per_token"); it != e.fields.end() && it->is_null()) {
    e.kv_bytes_unknown = true;
    e.fields.erase(it);
  }
  if (auto it = e.fields.find("knobs"); it != e.fields.end() && it->is_object()) {
    e.knobs = Recorded<KnobsFacts>::Read(*it);
    e.fields.erase(it);
  }
  if (auto it = e.fields.find("engine"); it != e.fields.end() && it->is_object()) {
    e.engine = EngineRecord::Of(*it);
    e.fields.erase(it);
  }
  if (auto it = e.fields.find("contradictions"); it != e.fields.end() && IsContradictions(*it)) {
    e.contradictions = read::Each<Contradiction>(*it, [](const json& c) {
      return Contradiction{c["knob"].get<std::string>(), read::Sub(c, "asked"), read::Sub(c, "ran")};
    });
    e.fields.erase(it);
  }
}

}  // namespace

json ConfigEntry::ToJson() const {
  json j = fields;
  j["name"] = name;
  if (status) j["status"] = std::string(NameOf(*status));
  if (reason) j["reason"] = *reason;
  if (!j.contains("captures")) j["captures"] = captures;
  if (model_path) j["model_path"] = *model_path;
  WriteFacts(*this, j);
  return j;
}

ConfigEntry ConfigEntry::FromJson(const json& j) {
  ConfigEntry e;
  e.fields = read::Without(j, {"name"});
  e.name = read::Str(j, "name");
  if ((e.status = ReadConfigStatus(j))) e.fields.erase("status");
  if ((e.reason = read::Opt<std::string>(j, "reason"))) e.fields.erase("reason");
  if ((e.model_path = read::Opt<std::string>(j, "model_path"))) e.fields.erase("model_path");
  const json& caps = read::Sub(j, "captures");
  const bool all_paths =
      caps.is_array() && std::all_of(caps.begin(), caps.end(), [](const json& c) { return c.is_string(); });
  if (all_paths) {
    for (const json& c : caps) e.captures.push_back(c.get<std::string>());
    e.fields.erase("captures");
  }
  TakeFacts(e);
  return e;
}

json ComparisonRecord::ToJson() const {
  return {
      {"config", entry.config}, {"repeat", entry.repeat}, {"compare", compare ? flipscope::ToJson(*compare) : json()}};
}

ComparisonRecord ComparisonRecord::FromJson(const json& j) {
  ComparisonRecord c;
  const json& doc = read::Sub(j, "compare");
  if (doc.is_object()) c.compare = ComparisonFromJson(doc);
  c.entry = {read::Str(j, "config"), read::Get(j, "repeat", 0),
             c.compare ? ComparisonFigures::Of(*c.compare) : ComparisonFigures{}};
  return c;
}

ForkCounts BranchRecord::Counts() const {
  const BranchCounts& c = result.counts;
  ForkCounts f;
  f.followed = c.total;
  f.damage = c.outcomes ? c.outcomes->damage.total : 0;
  f.repair = c.outcomes ? c.outcomes->repair.total : 0;
  f.teacher_forced_only = c.teacher_forced_only.value_or(0);
  f.forkable = c.branch_points.value_or(f.followed);
  return f;
}

json BranchRecord::ToJson() const {
  json j = result.ToJson();
  j["branch_config"] = std::move(j["config"]);
  j["config"] = config;
  if (free_counts) j["free_counts"] = flipscope::ToJson(*free_counts);
  read::KeepExtra(j, extra);
  return j;
}

BranchRecord BranchRecord::FromJson(const json& j) {
  BranchRecord b;
  b.config = read::Str(j, "config");
  // The branch output's parts, read in place (a session whose every fork was followed holds many records).
  b.result.config = BranchRunInfoFromJson(read::Sub(j, "branch_config"));
  b.result.records = read::Each<ForkRecord>(read::Sub(j, "records"), ForkRecordFromJson);
  b.result.counts = BranchCountsFromJson(read::Sub(j, "counts"));
  if (read::Sub(j, "free_counts").is_object()) b.free_counts = BranchCountsFromJson(j["free_counts"]);
  b.extra = read::Without(j, {"config", "branch_config", "records", "counts", "free_counts"});
  return b;
}

json LayersRecord::ToJson() const {
  json j = {{"config", config}};
  if (skipped) j["skipped"] = *skipped;
  if (error) j["error"] = *error;
  if (result) j["result"] = flipscope::ToJson(*result);
  return j;
}

LayersRecord LayersRecord::FromJson(const json& j) {
  LayersRecord r;
  r.config = read::Str(j, "config");
  r.skipped = read::Opt<std::string>(j, "skipped");
  r.error = read::Opt<std::string>(j, "error");
  if (const json& doc = read::Sub(j, "result"); doc.is_object()) r.result = LayersResultFromJson(doc);
  return r;
}

const ConfigEntry* Measurements::Config(const std::string& name) const {
  for (const ConfigEntry& c : configs)
    if (c.name == name) return &c;
  return nullptr;
}

const SummaryRow* Measurements::Row(const std::string& name) const {
  for (const SummaryRow& s : summary)
    if (s.config == name) return &s;
  return nullptr;
}

void Measurements::WriteInto(json& doc) const {
  doc["configs"] = ArrayOf(configs);
  doc["comparisons"] = ArrayOf(comparisons);
  if (floor) doc["floor"] = floor->ToJson();
  doc["summary"] = ArrayOf(summary);
  if (!load_floor.empty()) doc["load_floor"] = ArrayOf(load_floor);
  if (branches) doc["branches"] = ArrayOf(*branches);
}

Measurements Measurements::ReadFrom(const json& doc) {
  Measurements m;
  m.configs = ObjectsAt<ConfigEntry>(doc, "configs", ConfigEntry::FromJson);
  m.comparisons = ObjectsAt<ComparisonRecord>(doc, "comparisons", ComparisonRecord::FromJson);
  if (read::Sub(doc, "floor").is_object()) m.floor = Floor::FromJson(doc["floor"]);
  m.summary = ObjectsAt<SummaryRow>(doc, "summary", SummaryRow::FromJson);
  m.load_floor = ObjectsAt<LoadFloorRow>(doc, "load_floor", LoadFloorRow::FromJson);
  if (read::Sub(doc, "branches").is_array())
    m.branches = ObjectsAt<BranchRecord>(doc, "branches", BranchRecord::FromJson);
  return m;
}

json ReferenceResults::ToJson() const {
  json j = capture.ToJson();
  j["comparisons"] = ArrayOf(comparisons);
  j["summary"] = json::array();
  for (const SummaryRow& s : summary) j["summary"].push_back(s.ToReferenceJson());
  if (served_summary.empty()) return j;  // files of runs without served twins stay as they were
  j["served_comparisons"] = ArrayOf(served_comparisons);
  j["served_summary"] = json::array();
  for (const SummaryRow& s : served_summary) j["served_summary"].push_back(s.ToReferenceJson());
  return j;
}

const SummaryRow* ReferenceResults::Row(const std::string& config, bool served) const {
  for (const SummaryRow& s : served ? served_summary : summary)
    if (s.config == config) return &s;
  return nullptr;
}

ReferenceResults ReferenceResults::FromJson(const json& j) {
  ReferenceResults r;
  r.capture =
      ConfigEntry::FromJson(read::Without(j, {"comparisons", "summary", "served_comparisons", "served_summary"}));
  r.comparisons = ObjectsAt<ComparisonRecord>(j, "comparisons", ComparisonRecord::FromJson);
  r.summary = ObjectsAt<SummaryRow>(j, "summary", SummaryRow::FromJson);
  r.served_comparisons = ObjectsAt<ComparisonRecord>(j, "served_comparisons", ComparisonRecord::FromJson);
  r.served_summary = ObjectsAt<SummaryRow>(j, "served_summary", SummaryRow::FromJson);
  return r;
}

json RunSettings::ToJson() const {
  json j = fields.is_object() ? fields : json::object();
  if (window) j["window"] = *window;
  if (confident) j["confident"] = *confident;
  const std::optional<double>& b = memory_budget_bytes;
  const bool whole = b && *b >= 0 && *b < 0x1p64 && *b == std::floor(*b);
  j["memory_budget_bytes"] = !b ? json(nullptr) : whole ? json(uint64_t(*b)) : json(*b);
  return j;
}

RunSettings RunSettings::FromJson(const json& j) {
  RunSettings r;
  r.fields = read::Without(j, {});
  Take(r.fields, "window", r.window, IsInteger);
  Take(r.fields, "confident", r.confident, IsFloat);
  Take(r.fields, "memory_budget_bytes", r.memory_budget_bytes, [](const json& v) { return v.is_number(); });
  // null is how no budget is written; another value stays as read.
  if (auto it = r.fields.find("memory_budget_bytes"); it != r.fields.end() && it->is_null()) r.fields.erase(it);
  return r;
}

json ServedResults::ToJson() const {
  json skips = json::array();
  for (const ServedSkip& k : skipped) skips.push_back({{"config", k.config}, {"reason", k.reason}});
  json j = {{"baseline", baseline}, {"skipped", std::move(skips)}};
  read::PutIf(j, "asked_by", asked_by);
  measured.WriteInto(j);
  j["distance"] = ArrayOf(distance);
  if (ranking) j["ranking"] = ranking->ToJson();
  return j;
}

ServedResults ServedResults::FromJson(const json& j) {
  ServedResults s;
  s.baseline = read::Str(j, "baseline");
  s.asked_by = read::Opt<std::string>(j, "asked_by");
  for (const json& k : read::Sub(j, "skipped").is_array() ? j["skipped"] : json::array())
    s.skipped.push_back({read::Str(k, "config"), read::Str(k, "reason")});
  s.measured = Measurements::ReadFrom(j);
  s.distance = ObjectsAt<ReplayDistance>(j, "distance", ReplayDistance::FromJson);
  if (read::Sub(j, "ranking").is_object()) s.ranking = ReplayRanking::FromJson(j["ranking"]);
  return s;
}

namespace {

// The top-level keys ExperimentResults types (everything else stays in extra).
constexpr std::initializer_list<const char*> kTopLevel = {
    "flipscope_version", "created",    "name",        "experiment_file", "baseline",    "model", "settings",
    "workload",          "probe_plan", "environment", "configs",         "comparisons", "floor", "summary",
    "load_floor",        "branches",   "reference",   "layers",          "served",      "recipe"};

}  // namespace

json ExperimentResults::ToJson() const {
  json j = extra;
  j["flipscope_version"] = flipscope_version;
  j["created"] = created;
  j["name"] = name;
  j["experiment_file"] = experiment_file;
  j["baseline"] = baseline;
  j["model"] = model.record;
  j["settings"] = settings.ToJson();
  j["workload"] = workload.record;
  j["probe_plan"] = probe_plan.record;
  j["environment"] = environment.record;
  measured.WriteInto(j);
  if (reference) j["reference"] = reference->ToJson();
  if (layers) j["layers"] = ArrayOf(*layers);
  if (served) j["served"] = served->ToJson();
  if (recipe) j["recipe"] = flipscope::ToJson(*recipe);
  return j;
}

ExperimentResults ExperimentResults::FromJson(const json& j) {
  ExperimentResults r;
  r.extra = read::Without(j, kTopLevel);
  r.flipscope_version = read::Str(j, "flipscope_version");
  r.created = read::Str(j, "created");
  r.name = read::Str(j, "name");
  r.experiment_file = read::Str(j, "experiment_file");
  r.baseline = read::Str(j, "baseline");
  r.model = Recorded<ModelInfo>::Read(read::Sub(j, "model"));
  r.settings = RunSettings::FromJson(read::Sub(j, "settings"));
  r.workload = Recorded<WorkloadFacts>::Read(read::Sub(j, "workload"));
  r.probe_plan = Recorded<ProbePlanFacts>::Read(read::Sub(j, "probe_plan"));
  r.environment = EngineRecord::Of(read::Sub(j, "environment"));
  r.measured = Measurements::ReadFrom(j);
  if (read::Sub(j, "reference").is_object()) r.reference = ReferenceResults::FromJson(j["reference"]);
  if (read::Sub(j, "layers").is_array()) r.layers = ObjectsAt<LayersRecord>(j, "layers", LayersRecord::FromJson);
  if (read::Sub(j, "served").is_object()) r.served = ServedResults::FromJson(j["served"]);
  if (read::Sub(j, "recipe").is_object()) r.recipe = RecipeFromJson(j["recipe"]);
  return r;
}

Result<ExperimentResults> ReadResultsFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  const json doc = json::parse(*text, nullptr, false);
  if (doc.is_discarded()) return Status::Error(path + ": not a results.json written by flipscope run (not JSON)");
  if (!doc.is_object() || !read::Sub(doc, "configs").is_array())
    return Status::Error(path + ": not a results.json written by flipscope run (no configs array)");
  return ExperimentResults::FromJson(doc);
}

}  // namespace flipscope
