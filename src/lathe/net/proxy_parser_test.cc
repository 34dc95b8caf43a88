#include "lathe/net/proxy_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace lathe::net::proxy_detail {
namespace {

// Feeds `text` in pieces of `step` bytes, as reads from a socket would.
Status FeedInPieces(AnswerParser& p, const std::string& text, size_t step) {
  std::string pending;
  for (size_t at = 0; at < text.size(); at += step) {
    pending += text.substr(at, step);
    size_t used = 0;
    Status s = FeedParser(p, pending, false, &used);
    if (!s.ok()) return s;
    pending.erase(0, used);
  }
  return Status::OK();
}

TEST(AnswerParser, KeepsTheFieldsAsSentAndAChunkedBodyWhole) {
  const std::string answer =
      "HTTP/1.1 201 Created\r\nServer: up\r\nTransfer-Encoding: chunked\r\n"
      "set-cookie: a=1\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  for (size_t step : {answer.size(), size_t{7}, size_t{1}}) {
    AnswerParser p;
    PrepareParser(p, 64 << 10, /*head_request=*/false);
    ASSERT_TRUE(FeedInPieces(p, answer, step).ok()) << step;
    ASSERT_TRUE(p.is_done()) << step;
    EXPECT_EQ(p.status(), 201);
    EXPECT_EQ(p.headers(),
              (Headers{{"Server", "up"}, {"Transfer-Encoding", "chunked"}, {"set-cookie", "a=1"}}));
    EXPECT_EQ(p.body(), "abcde");
    EXPECT_TRUE(p.keep_alive());
  }
}

TEST(AnswerParser, ASizedBodyInTwoReadsAndConnectionClose) {
  AnswerParser p;
  PrepareParser(p, 64 << 10, false);
  ASSERT_TRUE(
      FeedInPieces(p, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhel", 1000)
          .ok());
  EXPECT_TRUE(p.is_header_done());
  EXPECT_FALSE(p.is_done());
  EXPECT_EQ(p.content_length().value_or(0), 5u);
  size_t used = 0;
  ASSERT_TRUE(FeedParser(p, "lo", false, &used).ok());
  EXPECT_TRUE(p.is_done());
  EXPECT_EQ(p.body(), "hello");
  EXPECT_FALSE(p.keep_alive());
}

TEST(AnswerParser, AHeadAnswerHasNoBodyAndAGarbledOneIsABadResponse) {
  AnswerParser head;
  PrepareParser(head, 64 << 10, /*head_request=*/true);
  ASSERT_TRUE(FeedInPieces(head, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 1000).ok());
  EXPECT_TRUE(head.is_done());
  EXPECT_EQ(head.body(), "");

  AnswerParser bad;
  PrepareParser(bad, 64 << 10, false);
  Status s = FeedInPieces(bad, "HTTP/1.1 2x0 OK\r\n\r\n", 1000);
  EXPECT_EQ(s.msg_id(), "proxy.bad_response");
}

}  // namespace
}  // namespace lathe::net::proxy_detail
