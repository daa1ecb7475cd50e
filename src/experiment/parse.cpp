// Experiment files: TOML -> Experiment, with errors that name the file and line. The top level
// and the checks across tables are here; the configuration tables ([baseline], [[variant]]) are
// read by parse_config.cpp, [probe], [branch], [layers] and [history] by parse_tables.cpp.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "experiment/experiment.h"
#include "experiment/parse_internal.h"
#include "util/util.h"

namespace flipscope {

namespace fs = std::filesystem;

std::string ExpandPath(const std::string& raw, const std::string& base_dir) {
  std::string s;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '$' && i + 1 < raw.size() && raw[i + 1] == '{') {
      size_t close = raw.find('}', i);
      if (close != std::string::npos) {
        const char* v = std::getenv(raw.substr(i + 2, close - i - 2).c_str());
        s += v ? v : "";
        i = close;
        continue;
      }
    }
    s += raw[i];
  }
  if (s.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    s = std::string(home ? home : "") + s.substr(1);
  }
  if (!s.empty() && fs::path(s).is_relative()) s = (fs::path(base_dir) / s).lexically_normal().string();
  return s;
}

Status CheckFileAt(const ParseCtx& c, const toml::node& node, const std::string& key, const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return c.At(node, key + " '" + path + "' not found");
  if (fs::is_directory(path, ec)) return c.At(node, key + " '" + path + "' is a folder, not a file");
  return Status::Ok();
}

Status ReadKeys(const ParseCtx& c, const toml::table& t, const std::string& where, const std::string& keys,
                const KeyReader& read) {
  for (auto& [k, node] : t) {
    std::string key(k.str());
    bool known = true;
    FS_RETURN_IF_ERROR(read(key, node, &known));
    if (!known)
      return c.At(node, "unknown key '" + key + "'" + (where.empty() ? "" : " in " + where) + " (" + keys + ")");
  }
  return Status::Ok();
}

// Reads a [section] table with ReadKeys; anything but a table is an error.
Status ReadSection(const ParseCtx& c, const toml::node& node, const std::string& section, const std::string& keys,
                   const KeyReader& read) {
  if (!node.is_table()) return c.At(node, section + " must be a table");
  return ReadKeys(c, *node.as_table(), section, keys, read);
}

namespace {

// Reads one top-level setting (name, model, workload, chat_template, format, window, reference,
// replay, confident, memory) into exp, paths relative to dir; *known is false for other keys.
Status ReadSetting(const ParseCtx& c, const std::string& key, const toml::node& node, const std::string& dir,
                   Experiment& exp, bool* known) {
  std::string& chat_template = exp.workload_options.chat_template;
  if (key == "name") return Get(c, node, exp.name, "name must be a string");
  if (key == "format") {
    std::string name;
    FS_RETURN_IF_ERROR(Get(c, node, name, "format must be a string"));
    auto format = ParseWorkloadFormat(name, "format");
    if (!format.ok()) return c.At(node, format.status().message());
    exp.workload_options.format = *format;
    return Status::Ok();
  }
  if (key == "model") {
    FS_RETURN_IF_ERROR(Get(c, node, exp.model, "model must be a path"));
    exp.model = ExpandPath(exp.model, dir);
    return CheckFileAt(c, node, "model", exp.model);
  } else if (key == "workload") {
    if (!exp.sessions.empty()) return c.At(node, "[[session]] and workload both name the workloads: use one");
    return ReadWorkloads(c, node, dir, exp);
  } else if (key == "chat_template") {
    FS_RETURN_IF_ERROR(Get(c, node, chat_template, "chat_template must be a string"));
    // A built-in name such as "gemma" stays as it is; one with / or . is a file.
    if (chat_template.find('/') != std::string::npos || chat_template.find('.') != std::string::npos)
      chat_template = ExpandPath(chat_template, dir);
  } else if (key == "window") {
    int64_t w = 0;
    FS_RETURN_IF_ERROR(Get(c, node, w, "window must be an integer"));
    if (w < 1) return c.At(node, "window must be >= 1");
    exp.window = int(w);
  } else if (key == "reference") {
    std::string reference;
    FS_RETURN_IF_ERROR(Get(c, node, reference, "reference must be \"exact\""));
    if (reference != "exact") return c.At(node, "reference must be \"exact\" (the FP64 exact engine, docs/exact.md)");
    exp.reference_exact = true;
  } else if (key == "reference_device") {
    FS_RETURN_IF_ERROR(Get(c, node, exp.reference_device, "reference_device must be a device name such as \"CUDA0\""));
  } else if (key == "replay") {
    std::string r;
    FS_RETURN_IF_ERROR(Get(c, node, r, "replay must be \"both\""));
    // One replay for every configuration is the baseline's knob (variants inherit it).
    if (r != "both")
      return c.At(node,
                  "replay at the top must be \"both\" (every configuration captured under prefill and "
                  "served replay); one replay for all is [baseline] replay = \"" +
                      r + "\"");
    exp.replay_both = true;
  } else if (key == "confident") {
    FS_RETURN_IF_ERROR(Get(c, node, exp.confident, "confident must be a probability"));
    if (exp.confident <= 0 || exp.confident > 1) return c.At(node, "confident must be in (0, 1]");
  } else if (key == "memory") {
    std::string m;
    FS_RETURN_IF_ERROR(Get(c, node, m, "memory must be a size such as \"8GiB\""));
    auto b = ParseBytes(m);
    if (!b.ok()) return c.At(node, b.status().message());
    exp.memory_budget = *b;
  } else {
    *known = false;
  }
  return Status::Ok();
}

// Reads the top level in file order: the settings, [probe], [branch] and [layers]. [baseline]
// and [[variant]] are only checked for their shape: they are read once the model is known.
Status ReadTopLevel(const ParseCtx& c, const toml::table& root, const std::string& dir, Experiment& exp) {
  const char* keys =
      "name, model, workload, chat_template, format, window, confident, memory, reference, reference_device, replay, "
      "[probe], "
      "[baseline], "
      "[[variant]], [branch], [layers], [history], [[session]], [matrix], [[axis]]";
  return ReadKeys(c, root, "", keys, [&](const std::string& key, const toml::node& node, bool* known) {
    if (key == "probe") return ReadProbe(c, node, exp);
    if (key == "branch") return ReadBranch(c, node, exp.branch);
    if (key == "layers") return ReadLayers(c, node, exp.layers);
    if (key == "history") return ReadHistory(c, node, dir, exp.history);
    if (key == "session") return ReadSessions(c, node, dir, exp);
    if (key == "matrix") return ReadMatrix(c, node, exp.matrix);
    if (key == "axis") return ReadAxes(c, node, exp.matrix);
    if (key == "baseline" && !node.is_table()) return c.At(node, "[baseline] must be a table");
    if (key == "variant" && !node.is_array_of_tables()) return c.At(node, "variants are written [[variant]]");
    if (key == "baseline" || key == "variant") return Status::Ok();
    return ReadSetting(c, key, node, dir, exp, known);
  });
}

// Reads [baseline] over the experiment's model, then each [[variant]] over the baseline; a
// variant needs a name no other configuration has, and a change.
Status ReadConfigs(const ParseCtx& c, const toml::table& root, const std::string& dir, Experiment& exp) {
  exp.baseline.name = "baseline";
  exp.baseline.model_path = exp.model;
  if (auto* t = root["baseline"].as_table()) FS_RETURN_IF_ERROR(ReadConfig(c, *t, nullptr, dir, exp.baseline));
  if (exp.baseline.name.empty()) exp.baseline.name = "baseline";
  std::set<std::string> names = {exp.baseline.name};
  auto* variants = root["variant"].as_array();
  if (!variants) return Status::Ok();
  for (auto& v : *variants) {
    ConfigSpec spec;
    FS_RETURN_IF_ERROR(ReadConfig(c, *v.as_table(), &exp.baseline, dir, spec));
    if (spec.name.empty()) return c.At(v, "a variant needs a name");
    if (!names.insert(spec.name).second) return c.At(v, "duplicate configuration name '" + spec.name + "'");
    if (spec.changes.empty()) return c.At(v, "variant '" + spec.name + "' changes nothing from the baseline");
    exp.variants.push_back(std::move(spec));
  }
  return Status::Ok();
}

// Checks the names across tables once all are read: none clashes with the reference's, and the
// configs of [branch] and [layers] name variants.
Status CheckNames(const Experiment& exp) {
  auto is_variant = [&](const std::string& name) {
    return std::any_of(exp.variants.begin(), exp.variants.end(), [&](const ConfigSpec& v) { return v.name == name; });
  };
  if (!exp.reference_device.empty() && !exp.reference_exact)
    return Status::Error(exp.path + ": reference_device = \"" + exp.reference_device +
                         "\" needs reference = \"exact\" (the device runs the exact reference)");
  if (exp.reference_exact && (exp.baseline.name == "exact" || is_variant("exact")))
    return Status::Error(exp.path + ": a configuration named 'exact' clashes with reference = \"exact\" (rename it)");
  for (const auto& [table, names] : {std::pair{"[branch]", &exp.branch.configs}, {"[layers]", &exp.layers.configs}})
    for (const auto& name : *names)
      if (!is_variant(name))
        return Status::Error(exp.path + ": " + table + " configs names '" + name + "', which is not a variant");
  // A history of configurations names them, each once; a history of versions is one set of knobs
  // (the baseline's) over the versions.
  if (exp.history.enabled && !exp.history.configs.empty()) {
    std::set<std::string> seen;
    for (const auto& name : exp.history.configs) {
      if (name != exp.baseline.name && !is_variant(name))
        return Status::Error(exp.path + ": [history] configs names '" + name + "', which is not a configuration");
      if (!seen.insert(name).second) return Status::Error(exp.path + ": [history] configs names '" + name + "' twice");
    }
    return Status::Ok();
  }
  if (exp.history.enabled &&
      (!exp.variants.empty() || exp.branch.enabled || exp.layers.enabled || exp.replay_both ||
       exp.baseline.engine != EngineKind::kLlama || exp.baseline.repeats != 1 || !exp.baseline.requantize.empty()))
    return Status::Error(exp.path +
                         ": [history] runs the [baseline] llama.cpp knobs (one repeat, the model as it is) over its "
                         "versions; it takes no [[variant]], [branch], [layers], replay = \"both\", repeats or "
                         "requantize");
  return Status::Ok();
}

// A served capture is compared only with a served one: under replay = "both" no configuration
// sets its own replay, and otherwise a variant whose replay differs from the baseline's changes
// nothing else (FoldReplayVariant then makes it the baseline's prefill-vs-served distance).
Status CheckReplay(const Experiment& exp) {
  auto at = [&](const ConfigSpec& s, const std::string& what) {
    return Status::Error(fmt::format("{}:{}: {}", exp.path, s.line, what));
  };
  if (exp.replay_both && exp.baseline.engine != EngineKind::kLlama)
    return at(exp.baseline,
              "replay = \"both\" needs a llama.cpp baseline: a server's served twin keeps only the decode steps it "
              "can prove, too few rows to measure every other twin against");
  std::vector<const ConfigSpec*> all = {&exp.baseline};
  for (const ConfigSpec& v : exp.variants) all.push_back(&v);
  for (const ConfigSpec* s : all) {
    if (!s->changes.contains("replay")) continue;
    if (exp.replay_both)
      return at(*s, "'" + s->name + "' sets replay, which replay = \"both\" at the top sets for every configuration");
    if (s != &exp.baseline && s->knobs.replay != exp.baseline.knobs.replay && s->changes.size() > 1)
      return at(*s, "variant '" + s->name +
                        "' changes replay and other settings: its flips would mix both; "
                        "replay = \"both\" at the top measures every configuration under each replay");
  }
  return Status::Ok();
}

// A variant whose only change is the replay measures the deployment's other path, not a setting
// to choose: over a llama.cpp baseline it is folded into replay = "both" (every configuration and
// its served twin, each replay ranked like with like), and its own figures become the baseline's
// prefill-vs-served distance. The lists of [branch], [layers] and [history] may name it only
// beside other variants (it is dropped from them). A server baseline keeps it as a variant: the
// recipe lists it as not ranked (a server's twin keeps too few rows to rank the others against).
Status FoldReplayVariant(Experiment& exp) {
  auto only_replay = [&](const ConfigSpec& v) {
    return v.changes.size() == 1 && v.changes.contains("replay") && v.knobs.replay != exp.baseline.knobs.replay;
  };
  auto it = std::find_if(exp.variants.begin(), exp.variants.end(), only_replay);
  if (it == exp.variants.end() || exp.baseline.engine != EngineKind::kLlama) return Status::Ok();
  if (auto other = std::find_if(std::next(it), exp.variants.end(), only_replay); other != exp.variants.end())
    return Status::Error(
        fmt::format("{}:{}: variants '{}' and '{}' both change only replay: one asks for the served "
                    "replay of every configuration",
                    exp.path, other->line, it->name, other->name));
  const std::string name = it->name;
  for (auto [table, names] : {std::pair{"[branch]", &exp.branch.configs},
                              {"[layers]", &exp.layers.configs},
                              {"[history]", &exp.history.configs}}) {
    if (std::find(names->begin(), names->end(), name) == names->end()) continue;
    if (names->size() == 1)
      return Status::Error(exp.path + ": " + table + " configs names only '" + name +
                           "', which changes only replay: it is no configuration of its own (every configuration "
                           "is measured under both replays); name the variants to look into");
    names->erase(std::remove(names->begin(), names->end(), name), names->end());
  }
  exp.replay_variant = name;
  exp.variants.erase(it);
  exp.replay_both = true;
  // Every configuration is captured prefill and as its served twin.
  exp.baseline.changes.values.erase("replay");
  exp.baseline.knobs.replay = Replay::kPrefill;
  for (ConfigSpec& v : exp.variants) v.knobs.replay = Replay::kPrefill;
  return Status::Ok();
}

// Reads the file as TOML; a syntax error names the file and line, a missing file says so.
Result<toml::table> ReadToml(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    if (!fs::exists(path)) return Status::Error(path + ": no such file");
    return Status::Error(fmt::format("{}:{}: {}", path, e.source().begin.line, e.description()));
  }
}

}  // namespace

Result<Experiment> ParseExperiment(const std::string& path) {
  FS_ASSIGN_OR_RETURN(toml::table root, ReadToml(path));
  const ParseCtx c{path};
  const std::string dir = fs::path(path).parent_path().string();
  Experiment exp;
  exp.path = path;
  exp.name = fs::path(path).stem().string();
  FS_RETURN_IF_ERROR(ReadTopLevel(c, root, dir, exp));
  if (exp.model.empty()) return Status::Error(path + ": no model given (model = \"path/to/model.gguf\")");
  if (exp.workload.empty()) return Status::Error(path + ": no workload given (workload = \"path\")");
  FS_RETURN_IF_ERROR(ReadConfigs(c, root, dir, exp));
  if (root["matrix"] && exp.matrix.axes.empty())
    return Status::Error(path + ": [matrix] without [[axis]] tables (name at least one axis)");
  FS_RETURN_IF_ERROR(ExpandMatrix(c, dir, exp));
  FS_RETURN_IF_ERROR(CheckNames(exp));
  if (!exp.sessions.empty() && exp.history.enabled)
    return Status::Error(path + ": [history] runs one workload; a suite of sessions takes none");
  FS_RETURN_IF_ERROR(CheckReplay(exp));
  FS_RETURN_IF_ERROR(FoldReplayVariant(exp));
  return exp;
}

}  // namespace flipscope
