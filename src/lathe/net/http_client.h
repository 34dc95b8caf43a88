// HttpClient: a small blocking HTTP/1.1 client (Boost.Beast, kept out of this
// header), for the CLI talking to the daemon (unix socket or TCP) and for tests.
//
// Thread-safety: one HttpClient is used by one thread at a time (it keeps one
// connection, so consecutive requests reuse it). Use one client per thread.
// Proxy environment variables are ignored: Lathe talks to its own daemon.
//
// https:// base URLs are verified: TLS 1.2 or later, a certificate chain to a
// CA the system trusts (or, with ca_file, to that CA only) and naming the URL's
// host (a DNS name, or an IP address in its subjectAltName). A certificate that
// does not verify is Code::kFailedPrecondition with catalog id tls.untrusted
// (tls.untrusted_ca with ca_file), saying so and naming --ca; not kUnavailable,
// so that no caller mistakes it for a daemon that is restarting.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lathe/common/status.h"
#include "lathe/net/http.h"

namespace lathe::net {

struct ClientOptions {
  std::string unix_socket;                    // if non-empty, connect through this unix socket
  std::string base_url = "http://localhost";  // http:// or https://host:port for TCP (host
                                              // ignored for unix); https defaults to port 443
  std::string ca_file;  // https: trust only the CA certificates in this PEM file (else the
                        // system's); unreadable: kInvalidArgument tls.bad_ca at the first request
  std::string bearer_token;  // adds Authorization: Bearer <token> when non-empty
  int connect_timeout_ms = 2000;
  int timeout_ms = 30000;  // whole request; 0 = none (for streams)
};

class HttpClient {
 public:
  explicit HttpClient(ClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request and reads the whole response. `path_and_query` starts with
  // '/' and is sent as written (escape it with PercentEncode). A non-empty body
  // gets Content-Type: application/json unless `headers` names one.
  // Connection failures (refused, no such socket, timeout connecting, the peer
  // hung up without an answer) return Code::kUnavailable; a response that takes
  // longer than timeout_ms returns kDeadlineExceeded.
  // HTTP error statuses are NOT Status errors: they come back in HttpResponse.status.
  Result<HttpResponse> Request(std::string_view method, std::string_view path_and_query,
                               std::string_view body = {}, const Headers& headers = {});

  // Streams the response body to `on_data` as it arrives (de-chunked), on the
  // calling thread; returning false from on_data stops and closes the
  // connection (not an error). Returns the HTTP status code. Same errors as Request.
  // `on_header`, if given, sees the status and headers before any of the body.
  Result<int> Stream(std::string_view method, std::string_view path_and_query,
                     const std::function<bool(std::string_view)>& on_data,
                     std::string_view body = {},
                     const std::function<void(int status, const Headers& headers)>& on_header = {});

  struct Conn;  // the socket and its read buffer (defined in the .cc)

 private:
  Status Connect();

  const ClientOptions options_;
  std::unique_ptr<Conn> conn_;  // the kept-alive connection, if any
};

}  // namespace lathe::net
