#include "lathe/api/client.h"

#include "lathe/api/credentials.h"

#include "lathe/api/limits.h"
#include "lathe/common/ids.h"
#include "lathe/common/units.h"
#include "lathe/daemon/home.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"

namespace lathe::api {
namespace {
Code CodeForHttp(int status) {
  switch (status) {
    case 400:
      return Code::kInvalidArgument;
    case 401:
    case 403:
      return Code::kPermissionDenied;
    case 404:
      return Code::kNotFound;
    case 409:
      return Code::kFailedPrecondition;
    case 413:
      return Code::kInvalidArgument;
    case 422:
      return Code::kInvalidArgument;
    case 429:
    case 507:
      return Code::kResourceExhausted;
    case 503:
      return Code::kUnavailable;
    default:
      return Code::kInternal;
  }
}
// The daemon's 413 is its HTTP layer's, {"error": "request body too large"}:
// say what was sent and what it takes.
// A request that got no answer. A certificate that was not trusted, or a CA
// file that cannot be used, is said as it is: the daemon may well be up.
Status Unreachable(const std::string& where, const Status& why) {
  if (why.msg_id().rfind("tls.", 0) == 0) return why;
  return Status::Msg(Code::kUnavailable, "cli.daemon_unreachable",
                     {{"where", where}, {"reason", why.message()}});
}

Status TooLarge(size_t request_bytes) {
  return Status::Msg(
      Code::kInvalidArgument, "cli.request_too_large",
      {{"size", FormatBytes(request_bytes)}, {"limit", FormatBytes(kMaxRequestBodyBytes)}});
}

}  // namespace

ApiClient::ApiClient(std::string where, std::string why, net::ClientOptions options)
    : where_(std::move(where)), why_(std::move(why)), tcp_(options.unix_socket.empty()) {
  http_ = std::make_unique<net::HttpClient>(std::move(options));
}

namespace {
constexpr int kClientTimeoutMs = 60000;
}  // namespace

std::unique_ptr<ApiClient> ApiClient::ForUrl(const std::string& url, const std::string& token,
                                             const std::string& why, const std::string& ca_file) {
  net::ClientOptions o;
  o.base_url = url;
  o.ca_file = ca_file;
  o.bearer_token = token;
  o.timeout_ms = kClientTimeoutMs;
  return std::unique_ptr<ApiClient>(new ApiClient(url, why, std::move(o)));
}

Result<std::unique_ptr<ApiClient>> ApiClient::Connect() { return ConnectTo(true); }
Result<std::unique_ptr<ApiClient>> ApiClient::ConnectLocal() { return ConnectTo(false); }

namespace {
// Whether a daemon that does not answer has run here, so that it may be
// restarting: `lathe login` names one, or a candidate home still has its
// socket (a killed daemon's, refusing) or its endpoint.json (written at
// every start).
bool DaemonRanHere() {
  const auto candidates = daemon::ClientCandidates();
  for (const auto& c : candidates) {
    if (os::Exists(c.paths.socket) || os::Exists(c.paths.endpoint)) return true;
  }
  if (!candidates.empty() && candidates[0].why == "LATHE_HOME") return false;
  auto login = LoadCredentials();
  return login.ok() && login->has_value();
}
}  // namespace

Result<std::unique_ptr<ApiClient>> ApiClient::ConnectWaiting(
    const std::function<void(const Status&)>& on_wait) {
  auto c = ConnectTo(true);
  if (c.ok() || c.status().code() != Code::kUnavailable || !DaemonRanHere()) return c;
  if (on_wait) on_wait(c.status());
  os::Clock& clock = os::RealClock();
  const int64_t deadline = clock.MonotonicMs() + kRestartWaitMs;
  while (clock.MonotonicMs() < deadline) {
    clock.SleepMs(kRestartPollMs);
    c = ConnectTo(true);
    if (c.ok() || c.status().code() != Code::kUnavailable) return c;
  }
  return c;
}

Result<std::unique_ptr<ApiClient>> ApiClient::ConnectTo(bool use_login) {
  const auto candidates = daemon::ClientCandidates();
  const bool explicit_home = !candidates.empty() && candidates[0].why == "LATHE_HOME";
  if (use_login && !explicit_home) {
    ASSIGN_OR_RETURN(std::optional<Credentials> login, LoadCredentials());
    if (login) {
      // An HTTP error (401 for a revoked token) is the command's to report.
      std::unique_ptr<ApiClient> client = ForUrl(login->url, login->token, "login", login->ca_file);
      auto r = client->http_->Request("GET", "/api/v1/status");
      if (r.ok()) return client;
      return Unreachable(login->url, r.status());
    }
  }
  std::string tried;
  Status last = Status::Unavailable("no daemon found");
  for (const auto& c : candidates) {
    tried += (tried.empty() ? "" : ", ") + c.paths.socket;
    if (!os::Exists(c.paths.socket)) {
      last = Status::Unavailable("no socket at " + c.paths.socket);
      continue;
    }
    net::ClientOptions o;
    o.unix_socket = c.paths.socket;
    o.timeout_ms = kClientTimeoutMs;
    std::unique_ptr<ApiClient> client(new ApiClient(c.paths.socket, c.why, std::move(o)));
    auto r = client->http_->Request("GET", "/api/v1/status");
    if (r.ok()) return client;
    last = r.status();
  }
  return Status::Msg(Code::kUnavailable, "cli.daemon_unreachable",
                     {{"where", tried}, {"reason", last.message()}});
}

Result<Json> ApiClient::Decode(const Result<net::HttpResponse>& r, size_t request_bytes) {
  if (!r.ok()) return Unreachable(where_, r.status());
  if (r->status == 413) return TooLarge(request_bytes);
  auto body = ParseJsonAnswer(r->body);
  if (r->status >= 400) {
    return StatusFromJson(body.ok() ? *body : Json(r->body), CodeForHttp(r->status));
  }
  if (!body.ok()) return Status::Internal("the daemon sent a malformed answer");
  return *body;
}

Result<Json> ApiClient::Get(const std::string& path) { return Decode(http_->Request("GET", path)); }

Result<Json> ApiClient::Delete(const std::string& path) {
  return Decode(http_->Request("DELETE", path));
}

namespace {
// A request body as JSON text. A string that is not UTF-8 (a path given on
// the command line in another encoding) cannot travel as JSON: an error
// naming the field it is in, not an exception that ends the CLI.
Result<std::string> BodyText(const Json& body) {
  try {
    return body.dump();
  } catch (const Json::exception&) {
    std::string field = "request";
    if (body.is_object()) {
      for (const auto& [k, v] : body.items()) {
        try {
          (void)v.dump();  // throws on what JSON cannot carry (invalid UTF-8): checked here
        } catch (const Json::exception&) {
          field = k;
          break;
        }
      }
    }
    return Status::Msg(Code::kInvalidArgument, "input.bad_utf8", {{"field", field}});
  }
}
}  // namespace

Result<Json> ApiClient::Post(const std::string& path, const Json& body) {
  ASSIGN_OR_RETURN(std::string text, BodyText(body));
  return Decode(http_->Request("POST", path, text, {{"Content-Type", "application/json"}}),
                text.size());
}

Result<Json> ApiClient::Patch(const std::string& path, const Json& body) {
  ASSIGN_OR_RETURN(std::string text, BodyText(body));
  return Decode(http_->Request("PATCH", path, text, {{"Content-Type", "application/json"}}),
                text.size());
}

Result<Json> ApiClient::Put(const std::string& path, const Json& body) {
  ASSIGN_OR_RETURN(std::string text, BodyText(body));
  return Decode(http_->Request("PUT", path, text, {{"Content-Type", "application/json"}}),
                text.size());
}

Result<Json> ApiClient::PostIdempotent(const std::string& path, const Json& body,
                                       const std::string& key,
                                       const std::function<void(const Status&)>& on_retry) {
  ASSIGN_OR_RETURN(const std::string text, BodyText(body));
  const net::Headers headers = {{"Content-Type", "application/json"}, {"Idempotency-Key", key}};
  auto r = http_->Request("POST", path, text, headers);
  if (!r.ok() && r.status().code() == Code::kUnavailable) {
    if (on_retry) on_retry(r.status());
    WaitForDaemon(kRestartWaitMs);
    r = http_->Request("POST", path, text, headers);
  }
  return Decode(r);
}

Result<Json> ApiClient::SubmitRun(const Json& spec,
                                  const std::function<void(const Status&)>& on_retry) {
  return PostIdempotent("/api/v1/runs", spec, NewSecret(), on_retry);
}

// Until the daemon's socket is back and answers, or `wait_ms` have passed.
void ApiClient::WaitForDaemon(int wait_ms) {
  os::Clock& clock = os::RealClock();
  const int64_t deadline = clock.MonotonicMs() + wait_ms;
  while (clock.MonotonicMs() < deadline) {
    if ((tcp_ || os::Exists(where_)) && http_->Request("GET", "/api/v1/status").ok()) return;
    clock.SleepMs(kRestartPollMs);
  }
}

Result<std::string> ApiClient::GetText(const std::string& path) {
  auto r = http_->Request("GET", path);
  if (!r.ok() || r->status >= 400) {
    auto j = Decode(r);
    return j.ok() ? Status::Internal("unexpected answer") : j.status();
  }
  return r->body;
}

Status ApiClient::GetStream(const std::string& path,
                            const std::function<bool(std::string_view)>& on_data,
                            net::Headers* headers) {
  constexpr size_t kMaxErrorBody = 1 << 20;
  int status = 0;
  std::string error_body;
  auto result = http_->Stream(
      "GET", path,
      [&](std::string_view chunk) {
        if (status < 400) return on_data(chunk);
        if (error_body.size() < kMaxErrorBody) error_body.append(chunk);
        return true;
      },
      {},
      [&](int st, const net::Headers& h) {
        status = st;
        if (headers) *headers = h;
      });
  if (!result.ok()) return Unreachable(where_, result.status());
  if (*result >= 400) {
    auto j = ParseJson(error_body);
    return StatusFromJson(j.ok() ? *j : Json(error_body), CodeForHttp(*result));
  }
  return Status::OK();
}

Status ApiClient::Stream(const std::string& path,
                         const std::function<bool(const std::string&, const Json&)>& on_event) {
  return StreamEvents("GET", path, {}, on_event);
}

Status ApiClient::PostStream(const std::string& path, const Json& body,
                             const std::function<bool(const std::string&, const Json&)>& on_event) {
  ASSIGN_OR_RETURN(std::string text, BodyText(body));
  return StreamEvents("POST", path, text, on_event);
}

Result<Json> ApiClient::PostForResult(
    const std::string& path, const Json& body,
    const std::function<void(const std::string&, const Json&)>& on_event) {
  Json result;
  Status failed;
  RETURN_IF_ERROR(PostStream(path, body, [&](const std::string& event, const Json& data) {
    if (event == "result") {
      result = data;
    } else if (event == "error") {
      failed = StatusFromJson(data, Code::kInternal);
    } else if (on_event) {
      on_event(event, data);
    }
    return true;
  }));
  if (!failed.ok()) return failed;
  if (result.is_null()) return Status::Unavailable("the daemon ended the stream without an answer");
  return result;
}

Status ApiClient::StreamEvents(
    std::string_view method, const std::string& path, std::string_view body,
    const std::function<bool(const std::string&, const Json&)>& on_event) {
  std::string buf, event, data;
  std::string error_body;
  bool stop = false;
  auto result = http_->Stream(
      method, path,
      [&](std::string_view chunk) {
        buf.append(chunk);
        size_t nl;
        while ((nl = buf.find('\n')) != std::string::npos) {
          std::string line = buf.substr(0, nl);
          buf.erase(0, nl + 1);
          if (line.empty()) {  // end of one event
            if (!data.empty()) {
              auto j = ParseJson(data);
              if (j.ok() && !on_event(event.empty() ? "message" : event, *j)) stop = true;
            } else if (event.empty()) {
              error_body += line;
            }
            event.clear();
            data.clear();
            if (stop) return false;
          } else if (line.rfind("event: ", 0) == 0) {
            event = line.substr(7);
          } else if (line.rfind("data: ", 0) == 0) {
            data += line.substr(6);
          } else if (line[0] != ':' && line.rfind("id: ", 0) != 0) {
            error_body += line;  // not SSE: an error body
          }
        }
        return true;
      },
      body);
  if (!result.ok()) return Unreachable(where_, result.status());
  if (*result == 413) return TooLarge(body.size());
  if (*result >= 400) {
    auto j = ParseJson(error_body + buf);
    return StatusFromJson(j.ok() ? *j : Json(error_body + buf), CodeForHttp(*result));
  }
  return Status::OK();
}

}  // namespace lathe::api
