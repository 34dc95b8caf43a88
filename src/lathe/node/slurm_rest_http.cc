#include "lathe/node/slurm_rest_http.h"

#include <utility>

#include "lathe/net/http_client.h"

namespace lathe::node {
namespace {

class HttpTransport final : public exec::SlurmRestTransport {
 public:
  explicit HttpTransport(net::ClientOptions options) : options_(std::move(options)) {}

  Result<exec::SlurmRestReply> Post(const std::string& path, const std::string& body,
                                    const std::map<std::string, std::string>& headers) override {
    net::HttpClient client(options_);
    net::Headers h(headers.begin(), headers.end());
    ASSIGN_OR_RETURN(net::HttpResponse r, client.Request("POST", path, body, h));
    return exec::SlurmRestReply{r.status, std::move(r.body)};
  }

 private:
  const net::ClientOptions options_;
};

}  // namespace

Result<std::unique_ptr<exec::SlurmRestTransport>> MakeSlurmRestTransport(const std::string& url,
                                                                         int64_t timeout_ms) {
  net::ClientOptions o;
  o.timeout_ms = static_cast<int>(timeout_ms);
  if (url.rfind("unix:/", 0) == 0) {
    o.unix_socket = url.substr(5);
  } else if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
    o.base_url = url;
    while (!o.base_url.empty() && o.base_url.back() == '/') o.base_url.pop_back();
  } else {
    return Status::InvalidArgument(
        "slurmrestd's url: http://host:port, https://host:port or "
        "unix:/path, not " +
        url);
  }
  return std::unique_ptr<exec::SlurmRestTransport>(new HttpTransport(std::move(o)));
}

}  // namespace lathe::node
