// HttpEngine under load: filler requests keep the server's batches full while the measured
// request runs, as other users' requests do on a production server.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/http_internal.h"
#include "util/util.h"

namespace flipscope::http {
namespace {

using json = nlohmann::json;

// A completion request that generates (temperature 0) and asks for no log-probabilities.
std::string FillerBody(const HttpOptions& o, std::span<const int32_t> prompt, int generate) {
  const std::vector<int32_t> ids(prompt.begin(), prompt.end());
  const int max_tokens = std::max(1, generate);  // both servers generate at least one token
  json req =
      o.api == HttpApi::kVllm
          ? json{{"model", o.served_model}, {"prompt", ids}, {"max_tokens", max_tokens}, {"temperature", 0.0}}
          : json{{"input_ids", ids}, {"sampling_params", {{"max_new_tokens", max_tokens}, {"temperature", 0.0}}}};
  return req.dump();
}

// What every filler request did, shared by the filler threads.
struct Log {
  std::mutex mu;
  std::condition_variable cv;
  int posted = 0;  // slots whose first request is on its way
  std::vector<FillerRequestRecord> requests;
  std::string error;  // the first failed filler request
};

constexpr int kHeadStartMs = 250;

}  // namespace

Result<Response> WithFillers(const Client& client, const HttpOptions& o, const std::vector<FillerSource>& pool,
                             int max_cells, const std::function<Result<Response>()>& measured,
                             ServerLoadRecord* record) {
  const std::string path = o.api == HttpApi::kVllm ? "/v1/completions" : "/generate";
  const double t0 = NowSeconds();
  std::atomic<bool> stop{false};
  Log log;
  auto filler = [&](int slot) {
    for (int k = 0; !stop; ++k) {
      FillerJob job = PlanFillerJob(uint64_t(o.load_seed), slot, k, pool, max_cells);
      auto prompt =
          std::span<const int32_t>(pool[size_t(job.source)].tokens).subspan(size_t(job.offset), size_t(job.length));
      std::string body = FillerBody(o, prompt, job.generate);
      {
        std::lock_guard<std::mutex> lock(log.mu);
        if (k == 0) ++log.posted;
      }
      log.cv.notify_all();
      const double start = NowSeconds() - t0;
      auto r = client.Post(path, body);
      std::lock_guard<std::mutex> lock(log.mu);
      const FillerJobRecord j = job.Record(pool);
      log.requests.push_back({.slot = j.slot,
                              .job = j.job,
                              .source = j.source,
                              .offset = j.offset,
                              .length = j.length,
                              .generate = j.generate,
                              .start_s = start,
                              .end_s = NowSeconds() - t0,
                              .status = r.ok() ? std::optional<int64_t>(r->status) : std::nullopt});
      if (log.error.empty() && (!r.ok() || r->status != 200))
        log.error = r.ok() ? fmt::format("HTTP {}: {}", r->status, ErrorText(r->body)) : r.status().message();
      if (!log.error.empty()) return;
    }
  };
  std::vector<std::thread> threads;
  for (int s = 1; s <= o.load; ++s) threads.emplace_back(filler, s);
  {
    // The measured request goes out once every filler has sent its first one.
    std::unique_lock<std::mutex> lock(log.mu);
    log.cv.wait(lock, [&] { return log.posted == o.load; });
  }
  // A head start, so the fillers' requests reach the server before the measured one: a posted
  // request may still be connecting.
  std::this_thread::sleep_for(std::chrono::milliseconds(kHeadStartMs));
  const double m_start = NowSeconds() - t0;
  Result<Response> r = measured();
  const double m_end = NowSeconds() - t0;
  stop = true;
  for (auto& t : threads) t.join();
  if (!log.error.empty())
    return Status::Error(
        client.Scrub(fmt::format("{}: a load filler request failed: {}", client.Where(path), log.error)));
  int overlapping = 0;
  for (const FillerRequestRecord& q : log.requests) overlapping += q.start_s < m_end && q.end_s > m_start;
  *record = {.fillers = o.load,
             .seed = o.load_seed,
             .cells_per_filler = max_cells,
             .measured_start_s = m_start,
             .measured_end_s = m_end,
             .overlapping = overlapping,
             .requests = std::move(log.requests)};
  return r;
}

}  // namespace flipscope::http
