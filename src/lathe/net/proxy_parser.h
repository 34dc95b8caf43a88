// The parts of reading an upstream's answer that the proxy's two paths share
// (its workers in proxy.cc, the event-driven path in proxy_event.cc). Only
// those two files include this header: it brings Boost.Beast.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "lathe/common/status.h"
#include "lathe/net/http.h"

namespace lathe::net::proxy_detail {

using ResponseParser = boost::beast::http::response_parser<boost::beast::http::string_body>;

// Limits the header, reads the body as it comes, and expects no body for HEAD.
inline void PrepareParser(ResponseParser& p, size_t max_header_bytes, bool head_request) {
  p.header_limit(static_cast<uint32_t>(max_header_bytes));
  // A number, not boost::none: Boost 1.74 compares a length with an empty
  // limit as greater ("body limit exceeded" for some Content-Length answers).
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  p.eager(true);
  if (head_request) p.skip(true);
}

// Feeds `bytes` (and the upstream's end, when `eof`); `*used` is how many
// the parser took. OK when it wants more or is done; proxy.bad_response for
// an answer it cannot parse.
inline Status FeedParser(ResponseParser& p, std::string_view bytes, bool eof, size_t* used) {
  boost::system::error_code ec;
  *used = bytes.empty() ? 0 : p.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (eof && !p.is_done() && (!ec || ec == boost::beast::http::error::need_more)) {
    ec = {};
    p.put_eof(ec);
  }
  if (!ec || ec == boost::beast::http::error::need_more) return Status::OK();
  return Status::Msg(Code::kUnavailable, "proxy.bad_response", {{"reason", ec.message()}});
}

// The answer's header fields, as the upstream sent them.
inline Headers HeadersOf(const ResponseParser& p) {
  Headers headers;
  for (const auto& f : p.get()) {
    headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
  return headers;
}

inline int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace lathe::net::proxy_detail
