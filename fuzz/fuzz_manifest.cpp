// Fuzz target: the manifest JSON. The input becomes the manifest string of an otherwise valid
// capture (what a capture written by another tool, or edited by hand, looks like); the reader
// parses it once into a CaptureManifest (spans, knobs, model facts) and the stages consume that:
// compare's spans (with a flip to describe) and the experiment's per-configuration facts.
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "capture/capture.h"
#include "compare/compare.h"
#include "experiment/steps.h"
#include "fuzz/fuzz_input.h"

using namespace flipscope;

namespace {

// A 4-token, 2-probe, 4-entry-vocabulary capture whose rows favour token `top`.
std::string CaptureBytes(const std::string& manifest, int32_t top) {
  const std::vector<int32_t> tokens = {0, 1, 2, 3}, positions = {0, 2}, argmax = {top, top};
  const std::vector<uint64_t> digest = {1, 2};
  std::vector<float> logits(8, 0.0f);
  logits[size_t(top)] = logits[size_t(4 + top)] = 1.0f;
  std::string data;
  nlohmann::json h;
  auto add = [&](const char* name, const char* dtype, std::vector<int64_t> shape, const void* p, size_t n) {
    h[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + n}}};
    data.append(static_cast<const char*>(p), n);
  };
  add("digest", "U64", {2}, digest.data(), 16);
  add("tokens", "I32", {4}, tokens.data(), 16);
  add("positions", "I32", {2}, positions.data(), 8);
  add("argmax", "I32", {2}, argmax.data(), 8);
  add("logits", "F32", {2, 4}, logits.data(), 32);
  h["__metadata__"] = {{kManifestKey, manifest}};
  std::string text = h.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.resize((text.size() + 7) / 8 * 8, ' ');
  const uint64_t n = text.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + text + data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string manifest(reinterpret_cast<const char*>(data), size);
  const std::string base_bytes = CaptureBytes(manifest, 1), cand_bytes = CaptureBytes("{}", 2);
  const std::string base_path =
      fuzz::InputFile(reinterpret_cast<const uint8_t*>(base_bytes.data()), base_bytes.size(), ".base.safetensors");
  const std::string cand_path =
      fuzz::InputFile(reinterpret_cast<const uint8_t*>(cand_bytes.data()), cand_bytes.size(), ".cand.safetensors");
  auto base = CaptureReader::Open(base_path);
  fuzz::ExpectOneLineError(base.status(), base_path);
  if (!base.ok()) return 0;
  // The reader parsed the manifest once (CaptureManifest::FromJson); what stages take from it:
  const CaptureManifest& m = (*base)->manifest();
  ConfigEntry entry;
  AddCaptureFacts(m, entry);
  ExperimentResults results;
  AddRunFacts(m, results);
  (void)entry.ToJson(), (void)results.ToJson();
  (void)m.ToJson();
  auto cand = CaptureReader::Open(cand_path);
  if (!cand.ok()) std::abort();  // the fixed candidate is valid
  CompareOptions options;
  options.threads = 1;
  options.log = Log::Quiet();
  auto c = Compare(**base, **cand, options);
  if (!c.ok() || c->flips.size() != 2) std::abort();  // every probe flips 1 -> 2
  return 0;
}
