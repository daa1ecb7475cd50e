// Suites and matrices in experiment files: `workload` as a list or a folder, [[session]] tables,
// and [matrix] / [[axis]] expanded into variants (docs/experiment.md, "Suites" and "Matrices").
// Every refusal is one line naming the file and line.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "experiment/parse_internal.h"

namespace flipscope {

namespace fs = std::filesystem;

namespace {

// The workload files of a folder: .json, .jsonl, .txt and .tokens, by name.
std::vector<std::string> WorkloadFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".json" || ext == ".jsonl" || ext == ".txt" || ext == ".tokens"))
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Adds a session, refusing a name another session has.
Status AddSession(const ParseCtx& c, const toml::node& at, SessionSpec s, Experiment& exp) {
  if (s.name.empty()) s.name = fs::path(s.workload).stem().string();
  for (const SessionSpec& o : exp.sessions)
    if (o.name == s.name) return c.At(at, "duplicate session name '" + s.name + "'");
  s.line = int(at.source().begin.line);
  exp.sessions.push_back(std::move(s));
  return Status::Ok();
}

// One [[session]] table: workload (required), name, weight.
Status ReadSessionTable(const ParseCtx& c, const toml::node& node, const std::string& dir, Experiment& exp) {
  SessionSpec s;
  const toml::node* workload = nullptr;
  FS_RETURN_IF_ERROR(ReadSection(c, node, "[[session]]", "workload, name, weight",
                                 [&](const std::string& key, const toml::node& n, bool* known) -> Status {
                                   if (key == "workload") {
                                     FS_RETURN_IF_ERROR(Get(c, n, s.workload, "workload must be a path"));
                                     s.workload = ExpandPath(s.workload, dir);
                                     workload = &n;
                                     return CheckFileAt(c, n, "workload", s.workload);
                                   }
                                   if (key == "name") return Get(c, n, s.name, "name must be a string");
                                   if (key == "weight") {
                                     auto w = n.value<double>();
                                     if (!w || *w <= 0) return c.At(n, "weight must be a number > 0");
                                     s.weight = *w;
                                     return Status::Ok();
                                   }
                                   *known = false;
                                   return Status::Ok();
                                 }));
  if (!workload) return c.At(node, "a [[session]] needs a workload");
  return AddSession(c, node, std::move(s), exp);
}

// The cells' knob values equal the baseline's: that cell is the baseline itself.
bool SameKnobs(const Knobs& a, const Knobs& b) {
  for (const KnobInfo& k : KnobTable())
    if (k.get(a) != k.get(b)) return false;
  return true;
}

// A value as a cell name writes it: strings as they are, numbers and booleans as TOML writes them.
std::string ValueText(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

Status ReadWorkloads(const ParseCtx& c, const toml::node& node, const std::string& dir, Experiment& exp) {
  if (node.is_string()) {
    const std::string path = ExpandPath(*node.value<std::string>(), dir);
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      exp.workload = path;
      return CheckFileAt(c, node, "workload", path);
    }
    const auto files = WorkloadFilesIn(path);
    if (files.empty()) return c.At(node, "workload folder '" + path + "' holds no .json, .jsonl, .txt or .tokens file");
    for (const auto& f : files) FS_RETURN_IF_ERROR(AddSession(c, node, {.workload = f}, exp));
  } else if (auto* list = node.as_array()) {
    if (list->empty()) return c.At(node, "workload is an empty list (name at least one file)");
    for (const toml::node& e : *list) {
      SessionSpec s;
      FS_RETURN_IF_ERROR(Get(c, e, s.workload, "workload list entries must be paths"));
      s.workload = ExpandPath(s.workload, dir);
      FS_RETURN_IF_ERROR(CheckFileAt(c, e, "workload", s.workload));
      FS_RETURN_IF_ERROR(AddSession(c, e, std::move(s), exp));
    }
  } else {
    return c.At(node, "workload must be a path, a folder or a list of paths");
  }
  exp.workload = exp.sessions.front().workload;
  return Status::Ok();
}

Status ReadSessions(const ParseCtx& c, const toml::node& node, const std::string& dir, Experiment& exp) {
  if (!node.is_array_of_tables()) return c.At(node, "sessions are written [[session]]");
  if (!exp.sessions.empty() || !exp.workload.empty())
    return c.At(node, "[[session]] and workload both name the workloads: use one");
  for (const toml::node& t : *node.as_array()) FS_RETURN_IF_ERROR(ReadSessionTable(c, t, dir, exp));
  exp.workload = exp.sessions.front().workload;
  return Status::Ok();
}

Status ReadMatrix(const ParseCtx& c, const toml::node& node, MatrixSettings& out) {
  return ReadSection(c, node, "[matrix]", "repeats, allow_large",
                     [&](const std::string& key, const toml::node& n, bool* known) -> Status {
                       if (key == "allow_large") return Get(c, n, out.allow_large, "allow_large must be true or false");
                       if (key == "repeats") {
                         auto r = n.value<int64_t>();
                         if (!r || *r < 1 || *r > 100) return c.At(n, "repeats must be an integer from 1 to 100");
                         out.repeats = int(*r);
                         return Status::Ok();
                       }
                       *known = false;
                       return Status::Ok();
                     });
}

Status ReadAxes(const ParseCtx& c, const toml::node& node, MatrixSettings& out) {
  if (!node.is_array_of_tables()) return c.At(node, "axes are written [[axis]]");
  std::set<std::string> names;
  for (const toml::node& t : *node.as_array()) {
    AxisSpec a;
    a.line = int(t.source().begin.line);
    FS_RETURN_IF_ERROR(ReadSection(
        c, t, "[[axis]]", "knob, name, values", [&](const std::string& key, const toml::node& n, bool* known) {
          if (key == "name") return Get(c, n, a.name, "name must be a string");
          if (key == "knob") {
            std::vector<const toml::node*> ks;
            if (auto* arr = n.as_array())
              for (const toml::node& k : *arr) ks.push_back(&k);
            else
              ks.push_back(&n);
            if (ks.empty()) return c.At(n, "knob is an empty list");
            for (const toml::node* k : ks) {
              std::string key_name;
              FS_RETURN_IF_ERROR(Get(c, *k, key_name, "knob must be a knob's name or a list of them"));
              if (!FindKnob(key_name) || key_name == "replay")
                return c.At(*k, "axis over '" + key_name + "', which is no knob");
              a.knobs.push_back(key_name);
            }
            return Status::Ok();
          }
          if (key == "values") {
            auto* arr = n.as_array();
            if (!arr) return c.At(n, "values must be a list");
            if (arr->empty()) return c.At(n, "values is an empty list");
            std::set<std::string> seen;
            for (const toml::node& v : *arr) {
              nlohmann::json j = v.is_string()    ? nlohmann::json(*v.value<std::string>())
                                 : v.is_integer() ? nlohmann::json(*v.value<int64_t>())
                                 : v.is_boolean() ? nlohmann::json(*v.value<bool>())
                                                  : nlohmann::json(v.value_or(0.0));
              if (!seen.insert(ValueText(j)).second) return c.At(v, "duplicate value '" + ValueText(j) + "'");
              a.values.push_back(std::move(j));
            }
            return Status::Ok();
          }
          *known = false;
          return Status::Ok();
        }));
    if (a.knobs.empty()) return c.At(t, "an [[axis]] needs a knob");
    if (a.values.empty()) return c.At(t, "an [[axis]] needs values");
    if (a.name.empty()) {
      const KnobInfo* k = FindKnob(a.knobs[0]);
      // The flag as llama.cpp spells it (its first form, "-t" of "-t,--threads"), without dashes.
      a.name = k->ShownFlag();
      a.name.erase(0, a.name.find_first_not_of('-'));
    }
    if (!names.insert(a.name).second) return c.At(t, "duplicate axis name '" + a.name + "'");
    out.axes.push_back(std::move(a));
  }
  return Status::Ok();
}

Status ExpandMatrix(const ParseCtx& c, const std::string& dir, Experiment& exp) {
  MatrixSettings& m = exp.matrix;
  if (m.axes.empty()) return Status::Ok();
  size_t n = 1;
  for (const AxisSpec& a : m.axes) n *= a.values.size();
  if (n > size_t(MatrixSettings::kMaxCells) && !m.allow_large)
    return Status::Error(
        fmt::format("{}:{}: the matrix has {} cells, more than {}: set allow_large = true under [matrix]", c.file,
                    m.axes[0].line, n, MatrixSettings::kMaxCells));
  std::set<std::string> names = {exp.baseline.name};
  for (const ConfigSpec& v : exp.variants) names.insert(v.name);
  for (size_t cell = 0; cell < n; ++cell) {
    toml::table t;
    std::vector<std::string> parts;
    size_t rest = cell;
    // The last axis varies fastest, as nested loops written in file order would.
    std::vector<size_t> pick(m.axes.size());
    for (size_t i = m.axes.size(); i-- > 0;) pick[i] = rest % m.axes[i].values.size(), rest /= m.axes[i].values.size();
    for (size_t i = 0; i < m.axes.size(); ++i) {
      const nlohmann::json& v = m.axes[i].values[pick[i]];
      parts.push_back(m.axes[i].name + "-" + ValueText(v));
      for (const std::string& k : m.axes[i].knobs) {
        if (v.is_string())
          t.insert_or_assign(k, v.get<std::string>());
        else if (v.is_boolean())
          t.insert_or_assign(k, v.get<bool>());
        else if (v.is_number_integer())
          t.insert_or_assign(k, v.get<int64_t>());
        else
          t.insert_or_assign(k, v.get<double>());
      }
    }
    ConfigSpec spec;
    const std::string name = fmt::format("{}", fmt::join(parts, "+"));
    if (Status st = ReadConfig(c, t, &exp.baseline, dir, spec); !st.ok()) {
      // The cell's table is made here, so its line is the first axis's.
      std::string why = st.message();
      if (why.rfind(c.file + ":", 0) == 0) why = why.substr(why.find(": ", c.file.size()) + 2);
      return Status::Error(fmt::format("{}:{}: matrix cell {}: {}", c.file, m.axes[0].line, name, why));
    }
    spec.name = name;
    spec.repeats = m.repeats;
    spec.line = m.axes[0].line;
    spec.description = "matrix cell " + spec.name;
    if (SameKnobs(spec.knobs, exp.baseline.knobs) && spec.engine == exp.baseline.engine) {
      m.baseline_cell = spec.name;
      continue;
    }
    if (!names.insert(spec.name).second)
      return Status::Error(fmt::format("{}:{}: duplicate configuration name '{}' (a matrix cell and a variant)", c.file,
                                       spec.line, spec.name));
    m.cells.push_back(spec.name);
    exp.variants.push_back(std::move(spec));
  }
  return Status::Ok();
}

}  // namespace flipscope
