// The Asio types HttpServer's parts agree on (http_server.cc: listeners and
// the server; http_session.cc: one connection; tunnel.h: a connection turned
// into a byte tunnel), and the helpers they share.
//
// Private to the net module: it brings Asio and Beast's TLS stream, which
// http_server.h keeps out of every other module's translation units.
#pragma once

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <exception>
#include <type_traits>

#include <spdlog/spdlog.h>

#include "lathe/net/server_core.h"

namespace lathe::net::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
using boost::system::error_code;

// A connection's executor: a strand of the loop when several threads run
// the loop, the loop itself when one thread runs it (loop_per_thread): that
// thread serializes the connection's completions, and a strand would only
// add its queue, its locks and its reference counts to each of them.
// Every I/O object of a server is bound to one of the two (ServerImpl<Ex>).
using Strand = asio::strand<asio::io_context::executor_type>;
using LoopEx = asio::io_context::executor_type;
template <typename Ex>
using TimerOf = asio::basic_waitable_timer<Clock, asio::wait_traits<Clock>, Ex>;
template <typename Ex>
using TcpSocketOf = asio::basic_stream_socket<asio::ip::tcp, Ex>;
template <typename Ex>
using UnixSocketOf = asio::basic_stream_socket<asio::local::stream_protocol, Ex>;
// A tunnel's upstream: any connected stream socket (TCP, unix). A socket, not
// a posix descriptor, so that writes use MSG_NOSIGNAL.
template <typename Ex>
using UpstreamSocketOf = asio::basic_stream_socket<asio::generic::stream_protocol, Ex>;
template <typename Ex>
using TlsStreamOf = beast::ssl_stream<TcpSocketOf<Ex>>;

// The socket under a connection's stream: for timeouts (cancel), peeking,
// half-closing and closing.
template <typename Protocol, typename Ex>
asio::basic_stream_socket<Protocol, Ex>& Lowest(asio::basic_stream_socket<Protocol, Ex>& s) {
  return s;
}
template <typename Ex>
TcpSocketOf<Ex>& Lowest(TlsStreamOf<Ex>& s) {
  return s.next_layer();
}
template <typename Stream>
constexpr bool kIsTls = std::is_same_v<Stream, TlsStreamOf<typename Stream::executor_type>>;

// Read errors that only mean the peer went away (or we cancelled): not logged.
inline bool IsQuietReadError(const error_code& ec) {
  namespace http = beast::http;
  return ec == asio::error::eof || ec == http::error::end_of_stream ||
         ec == http::error::partial_message || ec == asio::error::connection_reset ||
         ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor ||
         ec == asio::error::broken_pipe || ec == asio::ssl::error::stream_truncated;
}

// Timer::cancel has no error_code overload; it throws only if the reactor fails.
template <typename T>
void CancelTimer(T& timer) {
  try {
    timer.cancel();
  } catch (const std::exception& e) {
    spdlog::error("http: cancelling a timer: {}", e.what());
  }
}

// Serves a new connection: a session of `core` on `executor` (the
// connection's strand, or its loop), registered with the core and started.
// `reject`: empty to serve, else the 503 body its one request gets.
// Instantiated in http_session.cc for every stream a listener accepts
// (TCP, unix, TLS over TCP; on a Strand or a LoopEx).
template <typename Stream>
void LaunchSession(std::shared_ptr<Core> core, Stream conn, typename Stream::executor_type executor,
                   std::string remote, Client client, std::string_view reject);

}  // namespace lathe::net::detail
