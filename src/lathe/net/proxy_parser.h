// The parts of reading an upstream's answer that the proxy's two paths share
// (its workers in proxy.cc, the event-driven path in proxy_event.cc). Only
// those two files include this header: it brings Boost.Beast.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "lathe/common/status.h"
#include "lathe/net/http.h"
#include "lathe/os/clock.h"

namespace lathe::net::proxy_detail {

using ResponseParser = boost::beast::http::response_parser<boost::beast::http::string_body>;

// The event-driven path's parser of an answer: Beast's parser with the
// header fields kept as the proxy passes them on (a list of name/value
// strings), not in Beast's field list — a node per field, and each copied
// into such a list afterwards, for every request.
class AnswerParser final : public boost::beast::http::basic_parser<false> {
 public:
  int status() const { return status_; }
  Headers& headers() { return headers_; }
  std::string& body() { return body_; }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;
  static std::string_view Std(string_view s) { return {s.data(), s.size()}; }

  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override {
    status_ = code;
    headers_.reserve(kUsualFields);
  }
  void on_field_impl(boost::beast::http::field, string_view name, string_view value,
                     error_code&) override {
    headers_.emplace_back(Std(name), Std(value));
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    constexpr std::uint64_t kReserveAtMost = 1 << 20;
    if (length) body_.reserve(static_cast<size_t>(std::min(*length, kReserveAtMost)));
  }
  size_t on_body_impl(string_view piece, error_code&) override {
    body_.append(piece.data(), piece.size());
    return piece.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, string_view piece, error_code&) override {
    body_.append(piece.data(), piece.size());
    return piece.size();
  }
  void on_finish_impl(error_code&) override {}

  static constexpr size_t kUsualFields = 8;  // one allocation for most answers' fields
  int status_ = 0;
  Headers headers_;
  std::string body_;
};

// Limits the header, reads the body as it comes, and expects no body for HEAD.
inline void PrepareParser(boost::beast::http::basic_parser<false>& p, size_t max_header_bytes,
                          bool head_request) {
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
inline Status FeedParser(boost::beast::http::basic_parser<false>& p, std::string_view bytes,
                         bool eof, size_t* used) {
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

// Milliseconds of the monotonic clock, at its coarse resolution: the
// deadlines and idle ages it stamps are of a second or more, checked a few
// times a second, and an exchange stamps three per request.
inline int64_t SteadyMs() { return os::CoarseMonotonicNs() / 1'000'000; }

}  // namespace lathe::net::proxy_detail
