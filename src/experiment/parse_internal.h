// Experiment-file parsing's internals (not part of the stage's interface), shared by parse.cpp
// (the top level, the checks across tables), parse_tables.cpp ([probe], [branch], [layers],
// [history]) and parse_config.cpp (the configuration tables, [baseline] and [[variant]]).
#pragma once

#include <fmt/format.h>
#include <toml++/toml.h>

#include <functional>
#include <string>

#include "experiment/experiment.h"

namespace flipscope {

// The file being parsed: every error names it and the line of the node at fault.
struct ParseCtx {
  std::string file;
  Status At(const toml::node& n, const std::string& what) const {
    return Status::Error(fmt::format("{}:{}: {}", file, n.source().begin.line, what));
  }
};

// Reads one key of a table; sets *known = false for a key the table does not have.
using KeyReader = std::function<Status(const std::string& key, const toml::node& node, bool* known)>;

// Reads `t` key by key in file order, so the first error in the file is the one reported. A key
// `read` does not know is "unknown key 'k' in <where> (<keys>)", without " in <where>" when
// `where` is empty (the top level, a configuration table).
Status ReadKeys(const ParseCtx& c, const toml::table& t, const std::string& where, const std::string& keys,
                const KeyReader& read);

// Reads a value of type T into out; a node of another type is the error `what`.
template <typename T>
Status Get(const ParseCtx& c, const toml::node& n, T& out, const char* what) {
  auto v = n.value<T>();
  if (!v) return c.At(n, std::string(what));
  out = *v;
  return Status::Ok();
}

// Reads a [section] table with ReadKeys; anything but a table is an error.
Status ReadSection(const ParseCtx& c, const toml::node& node, const std::string& section, const std::string& keys,
                   const KeyReader& read);

// [probe], [branch], [layers] and [history] (parse_tables.cpp); dir: the experiment file's folder.
Status ReadProbe(const ParseCtx& c, const toml::node& node, Experiment& exp);
Status ReadBranch(const ParseCtx& c, const toml::node& node, BranchSettings& out);
Status ReadLayers(const ParseCtx& c, const toml::node& node, LayersSettings& out);
Status ReadHistory(const ParseCtx& c, const toml::node& node, const std::string& dir, HistorySettings& out);

// Suites and matrices (parse_suite.cpp). `workload` as a file, a folder (each workload file in
// it a session) or a list of files; [[session]] tables; [matrix]; [[axis]] tables.
Status ReadWorkloads(const ParseCtx& c, const toml::node& node, const std::string& dir, Experiment& exp);
Status ReadSessions(const ParseCtx& c, const toml::node& node, const std::string& dir, Experiment& exp);
Status ReadMatrix(const ParseCtx& c, const toml::node& node, MatrixSettings& out);
Status ReadAxes(const ParseCtx& c, const toml::node& node, MatrixSettings& out);
// The axes' cross product appended to exp.variants (after [baseline] and [[variant]] are read),
// each cell named from its values; refuses more than kMaxCells cells without allow_large.
Status ExpandMatrix(const ParseCtx& c, const std::string& dir, Experiment& exp);

// Ok when path (a file key's value, resolved) is a file; else "<file>:<line>: <key> '<path>' not
// found" (or "is a folder"), at the node that named it: the run must not start on a missing file.
Status CheckFileAt(const ParseCtx& c, const toml::node& node, const std::string& key, const std::string& path);

// ~ and ${VAR} expanded; relative paths resolved against base_dir (the experiment file's folder).
std::string ExpandPath(const std::string& raw, const std::string& base_dir);

// Reads a configuration table into out: the baseline when base is null, else a variant over
// base's model, engine, server and knobs (repeats back to 1).
Status ReadConfig(const ParseCtx& c, const toml::table& t, const ConfigSpec* base, const std::string& base_dir,
                  ConfigSpec& out);

}  // namespace flipscope
