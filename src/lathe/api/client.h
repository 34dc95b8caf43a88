// The CLI's side of the API: finds the daemon (LATHE_HOME, then the user's
// own daemon, then the system socket) and calls it.
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

  const std::string& where() const { return where_; }  // the socket path
  const std::string& why() const { return why_; }      // "LATHE_HOME", "user daemon"...

  // HTTP errors come back as the daemon's Status (code, message id, args).
  Result<Json> Get(const std::string& path);
  Result<Json> Post(const std::string& path, const Json& body);
  Result<std::string> GetText(const std::string& path);
  // Server-sent events: calls on_event(event, data) until it returns false
  // or the stream ends.
  Status Stream(const std::string& path,
                const std::function<bool(const std::string&, const Json&)>& on_event);
  // The same for a POST whose answer is a stream of events.
  Status PostStream(const std::string& path, const Json& body,
                    const std::function<bool(const std::string&, const Json&)>& on_event);

 private:
  ApiClient(std::string where, std::string why);
  // request_bytes: the body sent, for a 413's message.
  Result<Json> Decode(const Result<net::HttpResponse>& r, size_t request_bytes = 0);
  Status StreamEvents(std::string_view method, const std::string& path, std::string_view body,
                      const std::function<bool(const std::string&, const Json&)>& on_event);

  std::string where_, why_;
  std::unique_ptr<net::HttpClient> http_;
};

}  // namespace lathe::api
