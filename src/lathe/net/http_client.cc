#include "lathe/net/http_client.h"

#include <curl/curl.h>

#include <mutex>

namespace lathe::net {

namespace {

// One request in flight: what to send, and where the answer goes.
struct Call {
  std::string_view method;
  std::string_view path;
  std::string_view body;
  const Headers* headers = nullptr;
  const std::function<bool(std::string_view)>* on_data = nullptr;  // null: collect the body
  HttpResponse response;
  bool stopped = false;  // on_data said stop
  std::string callback_error;  // on_data threw: it cannot unwind through libcurl
};

using SlistPtr = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* call = static_cast<Call*>(user);
  size_t len = size * count;
  if (call->on_data == nullptr) {
    call->response.body.append(data, len);
    return len;
  }
  try {
    if ((*call->on_data)(std::string_view(data, len))) return len;
  } catch (const std::exception& e) {
    call->callback_error = e.what();
  } catch (...) {
    call->callback_error = "unknown exception";
  }
  call->stopped = true;
  return 0;  // makes libcurl abort the transfer with CURLE_WRITE_ERROR
}

size_t OnHeaderLine(char* data, size_t size, size_t count, void* user) {
  auto* call = static_cast<Call*>(user);
  size_t len = size * count;
  std::string_view line = Trim(std::string_view(data, len));
  if (line.starts_with("HTTP/")) {
    call->response.headers.clear();  // a new response (after 100 Continue) starts over
  } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    call->response.headers.emplace_back(std::string(Trim(line.substr(0, colon))),
                                        std::string(Trim(line.substr(colon + 1))));
  }
  return len;
}

bool HasHeader(const Headers& headers, std::string_view name) {
  for (const auto& h : headers) {
    if (EqualsIgnoreCase(h.first, name)) return true;
  }
  return false;
}

// libcurl owns the strings it is given through curl_slist_append (it copies).
SlistPtr BuildHeaders(const Call& call, const std::string& bearer_token) {
  curl_slist* list = nullptr;
  // Without this libcurl waits up to a second for "100 Continue" on larger bodies.
  list = curl_slist_append(list, "Expect:");
  for (const auto& [name, value] : *call.headers) {
    std::string line = value.empty() ? name + ";" : name + ": " + value;
    list = curl_slist_append(list, line.c_str());
  }
  if (!bearer_token.empty() && !HasHeader(*call.headers, "Authorization")) {
    list = curl_slist_append(list, ("Authorization: Bearer " + bearer_token).c_str());
  }
  if (!call.body.empty() && !HasHeader(*call.headers, "Content-Type")) {
    list = curl_slist_append(list, "Content-Type: application/json");
  }
  return SlistPtr(list, &curl_slist_free_all);
}

void SetMethod(CURL* h, const Call& call) {
  if (call.method == "GET" && call.body.empty()) {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    return;
  }
  std::string method(call.method);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());  // libcurl copies strings
  bool sends_body = !call.body.empty() || call.method == "POST" || call.method == "PUT" ||
                    call.method == "PATCH";
  if (sends_body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call.body.size()));
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, call.body.empty() ? "" : call.body.data());
  }
}

// Turns a transport failure into a Status: could not reach the peer →
// Unavailable; reached it but too slow → DeadlineExceeded.
Status CurlStatus(CURL* h, CURLcode rc, const std::string& where, const char* errbuf) {
  std::string msg = where + ": " + (errbuf[0] ? errbuf : curl_easy_strerror(rc));
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT: {
      curl_off_t connect_us = 0;
      curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connect_us);
      if (connect_us == 0) return Status::Unavailable(msg);
      return Status::DeadlineExceeded(msg);
    }
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return Status::InvalidArgument(msg);
    case CURLE_OUT_OF_MEMORY:
      return Status::ResourceExhausted(msg);
    default:  // refused, no socket, hung up, reset, partial answer
      return Status::Unavailable(msg);
  }
}

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

Status Perform(CURL* h, const ClientOptions& options, Call& call);

// Created on first use and kept: its connection cache carries keep-alive.
Status EnsureHandle(void*& curl) {
  if (curl != nullptr) return Status::OK();
  GlobalInitOnce();
  curl = curl_easy_init();
  return curl ? Status::OK() : Status::Internal("curl_easy_init failed");
}

}  // namespace

HttpClient::HttpClient(ClientOptions options) : options_(std::move(options)) {}

HttpClient::~HttpClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<HttpResponse> HttpClient::Request(std::string_view method, std::string_view path_and_query,
                                         std::string_view body, const Headers& headers) {
  Call call{method, path_and_query, body, &headers, nullptr, {}, false, {}};
  RETURN_IF_ERROR(EnsureHandle(curl_));
  RETURN_IF_ERROR(Perform(static_cast<CURL*>(curl_), options_, call));
  return std::move(call.response);
}

Result<int> HttpClient::Stream(std::string_view method, std::string_view path_and_query,
                               const std::function<bool(std::string_view)>& on_data,
                               std::string_view body) {
  Headers no_headers;
  Call call{method, path_and_query, body, &no_headers, &on_data, {}, false, {}};
  RETURN_IF_ERROR(EnsureHandle(curl_));
  RETURN_IF_ERROR(Perform(static_cast<CURL*>(curl_), options_, call));
  return call.response.status;
}

namespace {

// Everything but the method and headers; `url` and `errbuf` must outlive the transfer.
void SetTransferOptions(CURL* h, const ClientOptions& options, Call& call, const std::string& url,
                        char* errbuf) {
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM; we are multi-threaded
  curl_easy_setopt(h, CURLOPT_PROXY, "");     // ignore http_proxy & co.: loopback only
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout_ms));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout_ms));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &call);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeaderLine);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &call);
  if (!options.unix_socket.empty()) {
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, options.unix_socket.c_str());
  }
}

Status Perform(CURL* h, const ClientOptions& options, Call& call) {
  curl_easy_reset(h);  // keeps the connection cache: keep-alive survives
  std::string url = options.base_url + std::string(call.path);
  char errbuf[CURL_ERROR_SIZE] = {0};
  SetTransferOptions(h, options, call, url, errbuf);
  SlistPtr headers = BuildHeaders(call, options.bearer_token);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  SetMethod(h, call);

  CURLcode rc = curl_easy_perform(h);
  std::string where = std::string(call.method) + " " +
                      (options.unix_socket.empty() ? url : options.unix_socket + ":" + std::string(call.path));
  if (!call.callback_error.empty()) {
    return Status::Internal(where + ": stream callback threw: " + call.callback_error);
  }
  // A stop asked for by on_data surfaces as a write error; it is not a failure.
  if (rc != CURLE_OK && !(call.stopped && rc == CURLE_WRITE_ERROR)) {
    return CurlStatus(h, rc, where, errbuf);
  }
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  call.response.status = static_cast<int>(code);
  char* content_type = nullptr;
  curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &content_type);
  call.response.content_type = content_type ? content_type : "";
  return Status::OK();
}

}  // namespace

}  // namespace lathe::net
