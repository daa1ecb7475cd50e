// Futures kept beside a capture (CAPTURE.forks.json, docs/branch.md): written by whoever decoded
// them while capturing (an experiment's captures, a history's workers: `capture --fork-at`), read
// by the branch stage, which then needs no pass of its own for that side.
#include <fmt/format.h>

#include "capture/capture.h"
#include "util/util.h"

namespace flipscope {

using json = nlohmann::json;

namespace {
std::string SidecarPath(const std::string& capture) { return capture + ".forks.json"; }
}  // namespace

Status WriteDecoded(const std::string& capture, const std::string& base0, const DecodedFutures& d) {
  FS_ASSIGN_OR_RETURN(auto cap, CaptureReader::Open(capture));
  FS_ASSIGN_OR_RETURN(auto base, CaptureReader::Open(base0));
  json futures = json::array();
  for (const auto& [pos, f] : d.at) {
    auto rep = d.reproduced.find(pos);
    futures.push_back({{"position", pos},
                       {"tokens", f.tokens},
                       {"probs", f.probs},
                       {"seconds", f.seconds},
                       {"stop", FutureStopName(f.stop)},
                       {"decoding", NameOf(f.decoding)},
                       {"first_masked", f.first_masked},
                       {"reproduced", rep != d.reproduced.end() && rep->second}});
  }
  json doc = {{"format", "flipscope.forks"},
              {"capture", capture},
              {"capture_created", cap->manifest().created},
              {"base", base0},
              {"base_created", base->manifest().created},
              {"max_tokens", d.max_tokens},
              {"max_call_tokens", d.max_call_tokens},
              {"decoding", NameOf(d.decoding)},
              {"futures", futures}};
  return WriteFileAtomic(SidecarPath(capture), doc.dump());
}

std::optional<DecodedFutures> ReadDecoded(const std::string& capture, const std::string& base0) {
  auto text = ReadFile(SidecarPath(capture));
  if (!text.ok()) return std::nullopt;
  auto cap = CaptureReader::Open(capture);
  auto base = CaptureReader::Open(base0);
  if (!cap.ok() || !base.ok()) return std::nullopt;
  try {
    json doc = json::parse(*text);
    // Stale when either capture was made again since.
    if (doc.at("format") != "flipscope.forks" || doc.at("capture_created") != (*cap)->manifest().created ||
        doc.at("base_created") != (*base)->manifest().created)
      return std::nullopt;
    DecodedFutures d;
    d.source = capture;
    d.max_tokens = doc.at("max_tokens").get<int>();
    d.max_call_tokens = doc.value("max_call_tokens", 0);  // older sidecars: no extension
    // Older sidecars: free futures; a decoding this version does not know: not reused.
    const auto decoding = FromName<FutureDecoding>(doc.value("decoding", std::string("free")));
    if (!decoding) return std::nullopt;
    d.decoding = *decoding;
    for (const json& f : doc.at("futures")) {
      int32_t pos = f.at("position").get<int32_t>();
      Future fut;
      fut.tokens = f.at("tokens").get<std::vector<int32_t>>();
      fut.probs = f.at("probs").get<std::vector<float>>();
      fut.seconds = f.at("seconds").get<double>();
      // Older sidecars lack how each future stopped, which the judge needs: not reused.
      auto stop = FutureStopFromName(f.at("stop").get<std::string>());
      if (!stop) return std::nullopt;
      fut.stop = *stop;
      const auto used = FromName<FutureDecoding>(f.value("decoding", std::string("free")));
      if (!used) return std::nullopt;
      fut.decoding = *used;
      fut.first_masked = f.value("first_masked", false);
      d.at[pos] = std::move(fut);
      d.reproduced[pos] = f.at("reproduced").get<bool>();
    }
    return d;
  } catch (const json::exception&) {
    return std::nullopt;  // unreadable: the branch stage runs the pass instead
  }
}

CaptureForks OwnForks(std::set<int32_t> points, int max_tokens, std::shared_ptr<DecodedFutures> out) {
  out->max_tokens = max_tokens;
  out->max_call_tokens = 0;
  out->decoding = FutureDecoding::kFree;
  CaptureForks f;
  f.max_tokens = max_tokens;
  f.plan = [points = std::move(points)](const Row& r) -> int32_t { return points.count(r.position) ? r.argmax : -1; };
  f.sink = [out](const ForkRequest& fr, const Future& fut) {
    out->at[fr.position] = fut;
    out->reproduced[fr.position] = true;  // the capture's own row
    return Status::Ok();
  };
  return f;
}

}  // namespace flipscope
