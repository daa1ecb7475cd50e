// Experiment files: TOML -> Experiment, with errors that name the file and line. The top level,
// [probe], [branch], [layers] and the checks across tables are here; the configuration tables
// ([baseline], [[variant]]) are read by parse_config.cpp.
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

namespace {

// Reads a value of type T into out; a node of another type is the error `what`.
template <typename T>
Status Get(const ParseCtx& c, const toml::node& n, T& out, const char* what) {
  auto v = n.value<T>();
  if (!v) return c.At(n, std::string(what));
  out = *v;
  return Status::Ok();
}

// configs = ["name", ...]: variant names (checked against the variants once they are read).
Status ReadNames(const ParseCtx& c, const toml::node& n, std::vector<std::string>& out) {
  auto* arr = n.as_array();
  if (!arr) return c.At(n, "configs must be a list of variant names");
  for (auto& e : *arr) {
    auto name = e.value<std::string>();
    if (!name) return c.At(e, "configs must be a list of variant names");
    out.push_back(*name);
  }
  return Status::Ok();
}

Status ReadLayers(const ParseCtx& c, const toml::node& node, LayersSettings& out) {
  if (!node.is_table()) return c.At(node, "[layers] must be a table");
  out.enabled = true;
  for (auto& [k, n] : *node.as_table()) {
    std::string key(k.str());
    int64_t v = 0;
    if (key == "enabled")
      FS_RETURN_IF_ERROR(Get(c, n, out.enabled, "enabled must be true or false"));
    else if (key == "exact")
      FS_RETURN_IF_ERROR(Get(c, n, out.exact, "exact must be true or false"));
    else if (key == "configs")
      FS_RETURN_IF_ERROR(ReadNames(c, n, out.configs));
    else if (key == "max_flips") {
      FS_RETURN_IF_ERROR(Get(c, n, v, "max_flips must be an integer"));
      if (v < 0) return c.At(n, "max_flips must be >= 0 (0: every flip)");
      out.max_flips = int(v);
    } else
      return c.At(n, "unknown key '" + key + "' in [layers] (enabled, configs, max_flips, exact)");
  }
  return Status::Ok();
}

}  // namespace

Result<Experiment> ParseExperiment(const std::string& path) {
  ParseCtx c{path};
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    if (!fs::exists(path)) return Status::Error(path + ": no such file");
    return Status::Error(fmt::format("{}:{}: {}", path, e.source().begin.line, e.description()));
  }
  Experiment exp;
  exp.path = path;
  std::string dir = fs::path(path).parent_path().string();
  exp.name = fs::path(path).stem().string();
  const toml::table* baseline = nullptr;
  for (auto& [k, node] : root) {
    std::string key(k.str());
    if (key == "name")
      FS_RETURN_IF_ERROR(Get(c, node, exp.name, "name must be a string"));
    else if (key == "model") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.model, "model must be a path"));
      exp.model = ExpandPath(exp.model, dir);
    } else if (key == "workload") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.workload, "workload must be a path"));
      exp.workload = ExpandPath(exp.workload, dir);
    } else if (key == "chat_template") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.workload_options.chat_template, "chat_template must be a string"));
      if (exp.workload_options.chat_template.find('/') != std::string::npos ||
          exp.workload_options.chat_template.find('.') != std::string::npos)
        exp.workload_options.chat_template = ExpandPath(exp.workload_options.chat_template, dir);
    } else if (key == "format")
      FS_RETURN_IF_ERROR(Get(c, node, exp.workload_options.format, "format must be a string"));
    else if (key == "window") {
      int64_t w = 0;
      FS_RETURN_IF_ERROR(Get(c, node, w, "window must be an integer"));
      if (w < 1) return c.At(node, "window must be >= 1");
      exp.window = int(w);
    } else if (key == "reference") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.reference, "reference must be \"exact\""));
      if (exp.reference != "exact")
        return c.At(node, "reference must be \"exact\" (the FP64 exact engine, docs/exact.md)");
    } else if (key == "confident") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.confident, "confident must be a probability"));
      if (exp.confident <= 0 || exp.confident > 1) return c.At(node, "confident must be in (0, 1]");
    } else if (key == "memory") {
      std::string m;
      FS_RETURN_IF_ERROR(Get(c, node, m, "memory must be a size such as \"8GiB\""));
      auto b = ParseBytes(m);
      if (!b.ok()) return c.At(node, b.status().message());
      exp.memory_budget = *b;
    } else if (key == "probe") {
      if (!node.is_table()) return c.At(node, "[probe] must be a table");
      for (auto& [pk, pn] : *node.as_table()) {
        std::string p(pk.str());
        if (p == "stride") {
          int64_t s = 0;
          FS_RETURN_IF_ERROR(Get(c, pn, s, "stride must be an integer"));
          if (s < 1) return c.At(pn, "stride must be >= 1");
          exp.plan.stride = int(s);
        } else if (p == "full")
          FS_RETURN_IF_ERROR(Get(c, pn, exp.plan.full, "full must be a string"));
        else if (p == "store") {
          std::string s;
          FS_RETURN_IF_ERROR(Get(c, pn, s, "store must be f32 or bf16"));
          auto st = ParseStore(s);
          if (!st.ok()) return c.At(pn, st.status().message());
          exp.store = *st;
        } else
          return c.At(pn, "unknown key '" + p + "' in [probe] (stride, full, store)");
      }
    } else if (key == "baseline") {
      if (!node.is_table()) return c.At(node, "[baseline] must be a table");
      baseline = node.as_table();
    } else if (key == "variant") {
      if (!node.is_array_of_tables()) return c.At(node, "variants are written [[variant]]");
    } else if (key == "branch") {
      if (!node.is_table()) return c.At(node, "[branch] must be a table");
      exp.branch.enabled = true;
      for (auto& [bk, bn] : *node.as_table()) {
        std::string b(bk.str());
        int64_t v = 0;
        if (b == "enabled")
          FS_RETURN_IF_ERROR(Get(c, bn, exp.branch.enabled, "enabled must be true or false"));
        else if (b == "configs")
          FS_RETURN_IF_ERROR(ReadNames(c, bn, exp.branch.configs));
        else if (b == "max_tokens" || b == "max_call_tokens" || b == "max_branches" || b == "reconverge") {
          FS_RETURN_IF_ERROR(Get(c, bn, v, "must be an integer"));
          // max_call_tokens 0 turns the extension off; the others count at least one.
          if (v < (b == "max_call_tokens" ? 0 : 1))
            return c.At(bn, b + (b == "max_call_tokens" ? " must be >= 0" : " must be >= 1"));
          (b == "max_tokens"        ? exp.branch.max_tokens
           : b == "max_call_tokens" ? exp.branch.max_call_tokens
           : b == "max_branches"    ? exp.branch.max_branches
                                    : exp.branch.reconverge) = int(v);
        } else
          return c.At(bn,
                      "unknown key '" + b +
                          "' in [branch] (enabled, configs, max_tokens, max_call_tokens, max_branches, reconverge)");
      }
    } else if (key == "layers") {
      FS_RETURN_IF_ERROR(ReadLayers(c, node, exp.layers));
    } else {
      return c.At(node, "unknown key '" + key +
                            "' (name, model, workload, chat_template, format, window, confident, memory, reference, "
                            "[probe], [baseline], [[variant]], [branch], [layers])");
    }
  }
  if (exp.model.empty()) return Status::Error(path + ": no model given (model = \"path/to/model.gguf\")");
  if (exp.workload.empty()) return Status::Error(path + ": no workload given (workload = \"path\")");
  exp.baseline.name = "baseline";
  exp.baseline.model_path = exp.model;
  if (baseline) FS_RETURN_IF_ERROR(ReadConfig(c, *baseline, nullptr, dir, exp.baseline));
  if (exp.baseline.name.empty()) exp.baseline.name = "baseline";
  std::set<std::string> names = {exp.baseline.name};
  if (auto arr = root["variant"].as_array()) {
    for (auto& v : *arr) {
      ConfigSpec spec;
      FS_RETURN_IF_ERROR(ReadConfig(c, *v.as_table(), &exp.baseline, dir, spec));
      if (spec.name.empty()) return c.At(v, "a variant needs a name");
      if (!names.insert(spec.name).second) return c.At(v, "duplicate configuration name '" + spec.name + "'");
      if (spec.changes.empty()) return c.At(v, "variant '" + spec.name + "' changes nothing from the baseline");
      exp.variants.push_back(std::move(spec));
    }
  }
  if (exp.reference == "exact" && names.count("exact"))
    return Status::Error(path + ": a configuration named 'exact' clashes with reference = \"exact\" (rename it)");
  for (const auto& [table, names] : {std::pair{"[branch]", &exp.branch.configs}, {"[layers]", &exp.layers.configs}})
    for (const auto& name : *names)
      if (std::none_of(exp.variants.begin(), exp.variants.end(), [&](const ConfigSpec& v) { return v.name == name; }))
        return Status::Error(path + ": " + table + " configs names '" + name + "', which is not a variant");
  return exp;
}

}  // namespace flipscope