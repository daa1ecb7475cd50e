// workload_info: prints what LoadWorkload makes of a workload for a model (the manifest part,
// and optionally the spans): a development tool for measuring token counts of examples.
//   workload_info MODEL WORKLOAD [--chat-template FILE|NAME] [--format F] [--spans]
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/runtime.h"
#include "workload/workload.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: workload_info MODEL WORKLOAD [--chat-template FILE|NAME] [--format F] [--spans]\n");
    return 2;
  }
  flipscope::InitLlamaLogging(false);
  flipscope::WorkloadOptions o;
  bool spans = false;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--chat-template") && i + 1 < argc) {
      o.chat_template = argv[++i];
    } else if (!std::strcmp(argv[i], "--format") && i + 1 < argc) {
      auto format = flipscope::ParseWorkloadFormat(argv[++i], "--format");
      if (!format.ok()) {
        std::fprintf(stderr, "workload_info: error: %s\n", format.status().message().c_str());
        return 2;
      }
      o.format = *format;
    } else if (!std::strcmp(argv[i], "--spans")) {
      spans = true;
    } else {
      std::fprintf(stderr, "workload_info: error: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  auto w = flipscope::LoadWorkload(argv[2], argv[1], o);
  if (!w.ok()) {
    std::fprintf(stderr, "workload_info: error: %s\n", w.status().message().c_str());
    return 1;
  }
  nlohmann::json out = w->info;
  if (spans) out["spans"] = flipscope::SpansToJson(w->spans);
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
