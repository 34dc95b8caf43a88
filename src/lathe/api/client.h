// The CLI's side of the API: finds the daemon and calls it. In this order
// (docs/cli.md, "Finding the daemon"):
//   1. LATHE_HOME: that home's socket, and nothing else;
//   2. `lathe login`'s credentials (credentials.h): that daemon over TCP with
//      its token, and nothing else;
//   3. the user's own daemon's socket, then the system socket.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/net/http_client.h"

namespace lathe::api {

class ApiClient {
 public:
  // Connects to the first candidate daemon that answers. Unavailable (exit
  // code 4) with the places tried when none does.
  static Result<std::unique_ptr<ApiClient>> Connect();
  // The same without step 2: a daemon on this machine (`lathe up`).
  static Result<std::unique_ptr<ApiClient>> ConnectLocal();
  // Connect() for a command that submits work (`run`, `notebook start`,
  // `deploy create`, `token create`): when no daemon answers (its socket
  // missing or refusing, the connection closed) but one has run here — a
  // login's, or a home whose socket or endpoint.json is there — it is taken
  // for a daemon that restarts: `on_wait` (may be empty) is told why, once,
  // and the candidates are tried again every kRestartPollMs for up to
  // kRestartWaitMs. Anything else (no daemon ever here, a certificate not
  // trusted, a bad credentials file) is returned at once, as by Connect().
  static Result<std::unique_ptr<ApiClient>> ConnectWaiting(
      const std::function<void(const Status&)>& on_wait = {});
  // The daemon at `url` ("http[s]://HOST:PORT") with `token`, without trying a
  // request first (`lathe login` checks the token itself). https is verified
  // with the CA certificates in `ca_file`, or the system's when "". A
  // certificate that does not verify fails every call with FailedPrecondition
  // tls.untrusted (net/http_client.h), not cli.daemon_unreachable.
  static std::unique_ptr<ApiClient> ForUrl(const std::string& url, const std::string& token,
                                           const std::string& why, const std::string& ca_file = "");

  // The socket path, or the URL over TCP.
  const std::string& where() const { return where_; }
  const std::string& why() const { return why_; }  // "LATHE_HOME", "login", "user daemon"...

  // HTTP errors come back as the daemon's Status (code, message id, args).
  Result<Json> Get(const std::string& path);
  Result<Json> Post(const std::string& path, const Json& body);
  Result<Json> Delete(const std::string& path);
  Result<Json> Patch(const std::string& path, const Json& body);
  Result<Json> Put(const std::string& path, const Json& body);
  // POST with "Idempotency-Key: `key`". When the daemon goes away during the
  // call (the connection reset or closed before an answer; its socket missing
  // or refused while it restarts), waits up to kRestartWaitMs for it to
  // answer again and sends the same request once more with the same key, so
  // that a request the daemon had already committed is answered with what it
  // created instead of being done twice. `on_retry` (may be empty) is told
  // why, before the retry. A timeout is not retried.
  Result<Json> PostIdempotent(const std::string& path, const Json& body, const std::string& key,
                              const std::function<void(const Status&)>& on_retry = {});
  // POST /api/v1/runs under a fresh random idempotency key (PostIdempotent).
  Result<Json> SubmitRun(const Json& spec, const std::function<void(const Status&)>& on_retry = {});

  static constexpr int kRestartWaitMs = 15000;
  static constexpr int kRestartPollMs = 100;
  Result<std::string> GetText(const std::string& path);
  // A plain answer handed to `on_data` as it arrives, so that a long one is
  // never held whole; `headers` (if given) gets the answer's headers.
  Status GetStream(const std::string& path, const std::function<bool(std::string_view)>& on_data,
                   net::Headers* headers = nullptr);
  // Server-sent events: calls on_event(event, data) until it returns false
  // or the stream ends.
  Status Stream(const std::string& path,
                const std::function<bool(const std::string&, const Json&)>& on_event);
  // The same for a POST whose answer is a stream of events.
  Status PostStream(const std::string& path, const Json& body,
                    const std::function<bool(const std::string&, const Json&)>& on_event);
  // A PostStream whose last event is its answer: "result" (the JSON) or
  // "error" (the catalog error, as a plain answer would carry it); every
  // other event goes to `on_event` (may be empty). Unavailable when the
  // stream ends without either.
  Result<Json> PostForResult(
      const std::string& path, const Json& body,
      const std::function<void(const std::string&, const Json&)>& on_event = {});

 private:
  ApiClient(std::string where, std::string why, net::ClientOptions options);
  static Result<std::unique_ptr<ApiClient>> ConnectTo(bool use_login);
  // request_bytes: the body sent, for a 413's message.
  Result<Json> Decode(const Result<net::HttpResponse>& r, size_t request_bytes = 0);
  void WaitForDaemon(int wait_ms);
  Status StreamEvents(std::string_view method, const std::string& path, std::string_view body,
                      const std::function<bool(const std::string&, const Json&)>& on_event);

  std::string where_, why_;
  bool tcp_ = false;  // over TCP (a login), not a unix socket
  std::unique_ptr<net::HttpClient> http_;
};

}  // namespace lathe::api
