// QuietCommonLog: silences llama.cpp's common-library logger for a scope: the workload's template
// renderer and grammar, and checkpoint's doctor when it renders a template (header only, so
// checkpoint takes no link dependency on workload).
#pragma once

#include <log.h>

namespace flipscope::workload {

// llama.cpp's common library logs template warnings and grammar derivations on its own logger;
// the library must not print, so its threshold is lowered while this object lives.
class QuietCommonLog {
 public:
  QuietCommonLog() : saved_(common_log_get_verbosity_thold()) { common_log_set_verbosity_thold(-1); }
  ~QuietCommonLog() { common_log_set_verbosity_thold(saved_); }
  QuietCommonLog(const QuietCommonLog&) = delete;
  QuietCommonLog& operator=(const QuietCommonLog&) = delete;

 private:
  int saved_;
};

}  // namespace flipscope::workload
