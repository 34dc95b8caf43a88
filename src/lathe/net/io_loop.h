// IoLoop: where one client connection of a server is served — its strand, and
// the io_context (one I/O loop) the strand runs on — handed out by
// Responder::loop so that code of the net module can run asynchronous I/O
// beside the connection and answer on the same thread (the reverse proxy's
// event-driven path, proxy_event.cc).
//
// Only the net module's own .cc files include this header: it brings Asio,
// which http.h keeps out of every other translation unit.
#pragma once

#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

namespace lathe::net {

class IoLoop {
 public:
  // Its concrete type, not a type-erased executor: a completion bound to it
  // is dispatched without the erased executor's calls (several per request).
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  IoLoop(Strand strand, boost::asio::io_context::executor_type loop)
      : strand_(std::move(strand)), loop_(std::move(loop)) {}
  // The connection's strand: completions bound to it run one at a time with
  // the connection's own, and may answer through the Responder at once.
  const Strand& strand() const { return strand_; }
  // The loop itself: I/O objects that outlive one connection (a kept
  // upstream connection reused by the next request on this loop).
  const boost::asio::io_context::executor_type& loop() const { return loop_; }

 private:
  Strand strand_;
  boost::asio::io_context::executor_type loop_;
};

}  // namespace lathe::net
