// checkpoint: `flipscope doctor`, the checks of a model file and its settings.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace flipscope {

// ---- `doctor`: checks of a model file ----------------------------------------------------------

enum class Severity { kOk, kInfo, kWarn, kError };
// "ok", "info", "warn", "error".
const char* SeverityName(Severity s);

struct Finding {
  std::string check;  // e.g. "chat_template", "bos", "pre_tokenizer"
  Severity severity = Severity::kInfo;
  std::string message;  // one line: what was found
  std::string fix;      // one line: what to do ("" when nothing)
};

struct DoctorOptions {
  std::string generation_config;  // a Hugging Face generation_config.json to check against
};

struct DoctorReport {
  std::string path;
  std::vector<Finding> findings;
  // The first finding of a check, or nullptr.
  const Finding* Find(const std::string& check) const;
  // 2 when any finding is an error, else 0.
  int ExitCode() const;
  // {"path", "exit_code", "findings": [{"check", "severity", "message", "fix"}]}.
  nlohmann::json ToJson() const;
  // One line per finding (and its fix), then the counts per severity.
  std::string ToText() const;
};

// The known chat-template family a template matches by its marker strings ("chatml", "llama3",
// "gemma", "mistral", "phi3", "deepseek", ...); "" when none matches.
std::string ChatTemplateFamily(const std::string& source);

// A GGUF metadata lookup: a key's value as text, "" when absent.
using GgufMeta = std::function<std::string(const std::string& key)>;

// Sampler-setting findings: the GGUF's general.sampling.* (llama.cpp applies them as defaults)
// against a generation_config.json object (null when none was given).
std::vector<Finding> CheckSamplerSettings(const GgufMeta& meta, const nlohmann::json& generation_config);

// The training context ({arch}.context_length) against {arch}.rope.scaling.{type, factor,
// original_context_length}.
Finding CheckRopeScaling(const GgufMeta& meta);

// Checks a GGUF model file: chat template, BOS/EOS/EOT against the template, tool-call support,
// sampler settings, context length against rope scaling, pre-tokenizer. Errors (missing,
// corrupt, unreadable generation config) name the file; problems of the model are findings.
Result<DoctorReport> RunDoctor(const std::string& path, const DoctorOptions& opts = {});

}  // namespace flipscope
