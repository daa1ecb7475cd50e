// Experiment files' option tables: [probe], [branch], [layers] and [history], each read key by
// key with errors that name the file and line.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <climits>

#include "experiment/experiment.h"
#include "experiment/parse_internal.h"

namespace flipscope {

namespace {

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

}  // namespace

// [probe]: the probe stride (>= 1), the positions probed in full, and how rows are stored.
Status ReadProbe(const ParseCtx& c, const toml::node& node, Experiment& exp) {
  const char* keys = "stride, full, store";
  return ReadSection(c, node, "[probe]", keys, [&](const std::string& key, const toml::node& n, bool* known) {
    if (key == "full") return Get(c, n, exp.plan.full, "full must be a string");
    if (key == "stride") {
      int64_t s = 0;
      FS_RETURN_IF_ERROR(Get(c, n, s, "stride must be an integer"));
      if (s < 1) return c.At(n, "stride must be >= 1");
      exp.plan.stride = int(s);
    } else if (key == "store") {
      std::string s;
      FS_RETURN_IF_ERROR(Get(c, n, s, "store must be f32 or bf16"));
      auto st = ParseStore(s);
      if (!st.ok()) return c.At(n, st.status().message());
      exp.store = *st;
    } else {
      *known = false;
    }
    return Status::Ok();
  });
}

// [branch]: following the forks at flips (on once the table is there, unless enabled = false).
Status ReadBranch(const ParseCtx& c, const toml::node& node, BranchSettings& out) {
  out.enabled = true;
  const char* keys =
      "enabled, configs, max_tokens, max_call_tokens, max_branches, pick, reconverge, fork_where, decoding, "
      "compare_free";
  return ReadSection(c, node, "[branch]", keys, [&](const std::string& key, const toml::node& n, bool* known) {
    if (key == "enabled") return Get(c, n, out.enabled, "enabled must be true or false");
    if (key == "compare_free") return Get(c, n, out.compare_free, "compare_free must be true or false");
    if (key == "configs") return ReadNames(c, n, out.configs);
    if (key == "fork_where") {
      std::string name;
      FS_RETURN_IF_ERROR(Get(c, n, name, "fork_where must be a string"));
      const std::optional<ForkScope> scope = FromName<ForkScope>(name);
      if (!scope) return c.At(n, "fork_where must be \"assistant\" or \"all\", not \"" + name + "\"");
      out.options.fork_where = *scope;
      return Status::Ok();
    }
    if (key == "pick") {
      std::string name;
      FS_RETURN_IF_ERROR(Get(c, n, name, "pick must be a string"));
      const std::optional<ForkPick> pick = FromName<ForkPick>(name);
      if (!pick) return c.At(n, "pick must be \"first\" or \"spread\", not \"" + name + "\"");
      out.options.pick = *pick;
      return Status::Ok();
    }
    if (key == "decoding") {
      std::string name;
      FS_RETURN_IF_ERROR(Get(c, n, name, "decoding must be a string"));
      const std::optional<DecodingMode> mode = FromName<DecodingMode>(name);
      if (!mode) return c.At(n, "decoding must be \"auto\", \"grammar\" or \"free\", not \"" + name + "\"");
      out.options.decoding = *mode;
      return Status::Ok();
    }
    int* count = key == "max_tokens"        ? &out.options.max_tokens
                 : key == "max_call_tokens" ? &out.options.max_call_tokens
                 : key == "max_branches"    ? &out.options.max_branches
                 : key == "reconverge"      ? &out.options.reconverge
                                            : nullptr;
    *known = count != nullptr;
    if (!count) return Status::Ok();
    int64_t v = 0;
    FS_RETURN_IF_ERROR(Get(c, n, v, "must be an integer"));
    // max_call_tokens 0 turns the extension off; the others count at least one.
    const int64_t least = key == "max_call_tokens" ? 0 : 1;
    if (v < least) return c.At(n, fmt::format("{} must be >= {}", key, least));
    *count = int(v);
    return Status::Ok();
  });
}

// [layers]: where the flips are born, layer by layer (on once the table is there, unless
// enabled = false).
Status ReadLayers(const ParseCtx& c, const toml::node& node, LayersSettings& out) {
  out.enabled = true;
  const char* keys = "enabled, configs, max_flips, exact, allow_drift";
  return ReadSection(c, node, "[layers]", keys, [&](const std::string& key, const toml::node& n, bool* known) {
    if (key == "enabled") return Get(c, n, out.enabled, "enabled must be true or false");
    if (key == "exact") return Get(c, n, out.options.exact, "exact must be true or false");
    if (key == "allow_drift") return Get(c, n, out.options.allow_drift, "allow_drift must be true or false");
    if (key == "configs") return ReadNames(c, n, out.configs);
    *known = key == "max_flips";
    if (!*known) return Status::Ok();
    int64_t v = 0;
    FS_RETURN_IF_ERROR(Get(c, n, v, "max_flips must be an integer"));
    if (v < 0) return c.At(n, "max_flips must be >= 0 (0: every flip)");
    out.options.max_flips = int(v);
    return Status::Ok();
  });
}

// A list of at least two strings for key `what` of [history], into out.
Status ReadVersions(const ParseCtx& c, const toml::node& n, const char* what, const char* example,
                    std::vector<std::string>& out) {
  const std::string shape = fmt::format("{} must be a list of {}", what, example);
  auto* arr = n.as_array();
  if (!arr) return c.At(n, shape);
  for (auto& e : *arr) {
    auto v = e.value<std::string>();
    if (!v) return c.At(e, shape);
    out.push_back(*v);
  }
  if (out.size() < 2) return c.At(n, fmt::format("{} needs at least two versions", what));
  return Status::Ok();
}

// [history]: releases = ["0.3.35", "0.3.36"], or llama_src = "DIR" with commits = ["A", "B"];
// cpu = "portable" | "native"; max_tokens = N; forks = N, fork_tokens = T (the forks at the step that
// changed most). Paths relative to the experiment file's folder.
Status ReadHistory(const ParseCtx& c, const toml::node& node, const std::string& dir, HistorySettings& out) {
  out.enabled = true;
  FS_RETURN_IF_ERROR(ReadSection(
      c, node, "[history]", "releases, llama_src, commits, configs, cpu, max_tokens, forks, fork_tokens",
      [&](const std::string& key, const toml::node& n, bool* known) {
        if (key == "cpu") {
          FS_RETURN_IF_ERROR(Get(c, n, out.cpu, "cpu must be \"portable\" or \"native\""));
          if (out.cpu != "portable" && out.cpu != "native") return c.At(n, "cpu must be \"portable\" or \"native\"");
          return Status::Ok();
        }
        if (key == "llama_src") {
          FS_RETURN_IF_ERROR(Get(c, n, out.llama_src, "llama_src must be the path of a llama.cpp git checkout"));
          out.llama_src = ExpandPath(out.llama_src, dir);
          return Status::Ok();
        }
        if (key == "max_tokens" || key == "forks" || key == "fork_tokens") {
          const bool zero_ok = key == "forks";  // forks = 0: none followed
          const std::string what = key + (zero_ok ? " must be a whole number >= 0" : " must be a whole number > 0");
          int64_t v = 0;
          FS_RETURN_IF_ERROR(Get(c, n, v, what.c_str()));
          if (v < (zero_ok ? 0 : 1) || v > INT32_MAX) return c.At(n, what);
          (key == "max_tokens" ? out.max_tokens : key == "forks" ? out.forks : out.fork_tokens) = int(v);
          return Status::Ok();
        }
        if (key == "releases")
          return ReadVersions(c, n, "releases", "llama-cpp-python versions, e.g. [\"0.3.35\", \"0.3.36\"]",
                              out.releases);
        if (key == "configs")
          return ReadVersions(c, n, "configs", "configuration names of this file, e.g. [\"baseline\", \"vllm-new\"]",
                              out.configs);
        *known = key == "commits";
        if (!*known) return Status::Ok();
        return ReadVersions(c, n, "commits", "commits, tags or branches of llama_src, e.g. [\"b5000\", \"b5010\"]",
                            out.commits);
      }));
  const toml::source_region& at = node.source();
  auto err = [&](const std::string& what) {
    return Status::Error(fmt::format("{}:{}: {}", c.file, at.begin.line, what));
  };
  if (int(!out.releases.empty()) + int(!out.commits.empty()) + int(!out.configs.empty()) > 1)
    return err("[history] takes one of releases, commits (of llama_src) or configs");
  if (!out.configs.empty()) {
    if (!out.llama_src.empty() || !out.cpu.empty() || out.max_tokens > 0 || out.forks > 0)
      return err(
          "[history] configs compares this file's configurations as the run captures them: no llama_src, cpu, "
          "max_tokens or forks (its [branch] follows the forks)");
    return Status::Ok();
  }
  if (!out.commits.empty() && out.llama_src.empty())
    return err("[history] commits needs llama_src (a llama.cpp git checkout)");
  if (out.commits.empty() && !out.llama_src.empty()) return err("[history] llama_src needs commits");
  if (out.releases.empty() && out.commits.empty())
    return err("[history] needs releases, llama_src and commits, or configs");
  return Status::Ok();
}

}  // namespace flipscope
