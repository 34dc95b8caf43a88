// IoLoop: where one client connection of a server is served — its strand, and
// the io_context (one I/O loop) the strand runs on — handed out by
// Responder::loop so that code of the net module can run asynchronous I/O
// beside the connection and answer on the same thread (the reverse proxy's
// event-driven path, proxy_event.cc).
//
// Only the net module's own .cc files include this header: it brings Asio,
// which http.h keeps out of every other translation unit.
#pragma once

#include <optional>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

namespace lathe::net {

class IoLoop {
 public:
  // Concrete types, not a type-erased executor: a completion bound to them
  // is dispatched without the erased executor's calls (several per request).
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;
  using Loop = boost::asio::io_context::executor_type;

  // A connection of a loop that several threads run: its strand serializes
  // the connection's completions.
  explicit IoLoop(Strand strand) : strand_(strand), loop_(strand.get_inner_executor()) {}
  // A connection of a loop that one thread runs (ServerOptions::
  // loop_per_thread): that thread runs the connection's completions one at
  // a time, without a strand's queue and locks.
  explicit IoLoop(Loop loop) : loop_(std::move(loop)) {}

  // The connection's strand, or none on a loop of one thread. Completions
  // bound to it (or, without one, of I/O objects of loop()) run one at a
  // time with the connection's own, and may answer through the Responder
  // at once.
  const std::optional<Strand>& strand() const { return strand_; }
  // The loop itself: I/O objects that outlive one connection (a kept
  // upstream connection reused by the next request on this loop).
  const Loop& loop() const { return loop_; }

 private:
  std::optional<Strand> strand_;
  Loop loop_;
};

}  // namespace lathe::net
