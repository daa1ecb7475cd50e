// HTTP transport for server engines: libcurl, one handle per request, retries with backoff on
// transient failures (5xx, 429, timeouts, refused connections), and messages that never hold the
// key or the URL's credentials.
#include <curl/curl.h>
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/http_internal.h"

namespace flipscope {

std::string RedactUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t host_begin = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t host_end = url.find_first_of("/?#", host_begin);
  const size_t at = url.rfind('@', host_end == std::string::npos ? url.size() : host_end);
  if (at == std::string::npos || at < host_begin) return url;
  return url.substr(0, host_begin) + url.substr(at + 1);
}

namespace http {
namespace {

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// libcurl's global state, initialised once for the process.
void EnsureCurl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool Transient(CURLcode code) {
  return code == CURLE_OPERATION_TIMEDOUT || code == CURLE_COULDNT_CONNECT || code == CURLE_RECV_ERROR ||
         code == CURLE_SEND_ERROR || code == CURLE_GOT_NOTHING || code == CURLE_PARTIAL_FILE;
}

}  // namespace

std::string ErrorText(std::string_view body) {
  std::string text(body);
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object()) {
    for (const char* key : {"message", "error", "detail"}) {
      if (!j.contains(key)) continue;
      const auto& v = j[key];
      if (v.is_string())
        text = v.get<std::string>();
      else if (v.is_object() && v.contains("message") && v["message"].is_string())
        text = v["message"];
      else
        text = v.dump();
      break;
    }
  }
  for (char& c : text)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (text.size() > 300) text = text.substr(0, 297) + "...";
  return text.empty() ? "(empty body)" : text;
}

Client::Client(const HttpOptions& opts, std::string api_key) : opts_(opts), key_(std::move(api_key)) {
  base_ = opts.url;
  while (!base_.empty() && base_.back() == '/') base_.pop_back();
}

std::string Client::Where(const std::string& path) const { return RedactUrl(base_) + path; }

std::string Client::Scrub(std::string text) const {
  if (key_.empty()) return text;
  for (size_t at = text.find(key_); at != std::string::npos; at = text.find(key_, at + 3))
    text.replace(at, key_.size(), "***");
  return text;
}

Result<Response> Client::Get(const std::string& path) const { return Send(path, nullptr); }

Result<Response> Client::Post(const std::string& path, const std::string& json_body) const {
  return Send(path, &json_body);
}

Result<Response> Client::Send(const std::string& path, const std::string* body) const {
  EnsureCurl();
  const std::string url = base_ + path;
  std::string last;
  double delay = opts_.backoff_s;
  for (int attempt = 0; attempt <= opts_.retries; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      delay *= 2;
    }
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return Status::Error(Where(path) + ": cannot create an HTTP handle");
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    const std::string auth = "Authorization: Bearer " + key_;
    if (!key_.empty()) headers = curl_slist_append(headers, auth.c_str());
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);
    Response r;
    curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, Append);
    curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, long(opts_.timeout_s * 1000));
    curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_ACCEPT_ENCODING, "");  // gzip when the server offers it
    if (body != nullptr) {
      curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, body->data());
      curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body->size()));
    }
    const CURLcode code = curl_easy_perform(curl.get());
    if (code != CURLE_OK) {
      last = code == CURLE_OPERATION_TIMEDOUT ? fmt::format("no answer within {} s (--timeout)", opts_.timeout_s)
                                              : curl_easy_strerror(code);
      if (!Transient(code)) return Status::Error(Scrub(Where(path) + ": " + last));
      // A launched server that has exited will not answer a retry: say how it ended instead.
      if (opts_.alive)
        if (Status alive = opts_.alive(); !alive.ok())
          return Status::Error(Scrub(Where(path) + ": " + alive.message()));
      continue;
    }
    curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &r.status);
    if (r.status >= 500 || r.status == 429) {
      last = fmt::format("HTTP {}: {}", r.status, ErrorText(r.body));
      continue;
    }
    return r;
  }
  return Status::Error(Scrub(fmt::format("{}: {} (gave up after {} attempts; retries {})", Where(path), last,
                                         opts_.retries + 1, opts_.retries)));
}

}  // namespace http
}  // namespace flipscope
