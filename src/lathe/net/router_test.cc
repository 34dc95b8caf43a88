#include "lathe/net/router.h"

#include <gtest/gtest.h>

#include "lathe/net/status_http.h"

namespace lathe::net {
namespace {

using Kind = RouteMatch::Kind;

Router<int> ApiLike() {
  Router<int> r;
  Status s = r.AddAll({
      {"GET", "/api/v1/runs", 1},
      {"POST", "/api/v1/runs", 2},
      {"GET", "/api/v1/runs/{run}", 3},
      {"POST", "/api/v1/runs/{run}/stop", 4},
      {"GET", "/api/v1/runs/{run}/logs", 5},
      {"POST", "/v1/models/{model}:predict", 6},
      {"POST", "/v1/models/{model}/versions/{version}:predict", 7},
      {"DELETE", "/api/v1/runs/{run}", 8},
      {"GET", "/api/v1/snapshots/{snap}", 9},
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

int Found(const Router<int>& r, std::string_view method, std::string_view path,
          PathParams* params = nullptr) {
  const int* h = nullptr;
  RouteMatch m = r.Find(method, path, &h);
  if (m.kind != Kind::kFound) return 0;
  EXPECT_NE(h, nullptr);
  if (params) *params = m.params;
  return *h;
}

TEST(Router, MatchesMethodAndPathAndExtractsParams) {
  Router<int> r = ApiLike();
  EXPECT_EQ(Found(r, "GET", "/api/v1/runs"), 1);
  EXPECT_EQ(Found(r, "POST", "/api/v1/runs"), 2);
  PathParams p;
  EXPECT_EQ(Found(r, "GET", "/api/v1/runs/r3k7", &p), 3);
  EXPECT_EQ(p.size(), 1u);
  EXPECT_EQ(p.Get("run"), "r3k7");
  EXPECT_EQ(p.Get("model"), "");
  EXPECT_EQ(Found(r, "POST", "/api/v1/runs/resnet/stop", &p), 4);
  EXPECT_EQ(p.Get("run"), "resnet");
  EXPECT_EQ(Found(r, "GET", "/api/v1/runs/a b/logs", &p),
            5);  // the path is already percent-decoded
  EXPECT_EQ(p.Get("run"), "a b");
}

TEST(Router, ParamWithLiteralSuffix) {
  Router<int> r = ApiLike();
  PathParams p;
  EXPECT_EQ(Found(r, "POST", "/v1/models/mlp:predict", &p), 6);
  EXPECT_EQ(p.Get("model"), "mlp");
  EXPECT_EQ(Found(r, "POST", "/v1/models/mlp/versions/3:predict", &p), 7);
  EXPECT_EQ(p.Get("model"), "mlp");
  EXPECT_EQ(p.Get("version"), "3");
  EXPECT_EQ(p.size(), 2u);
  // A parameter is never empty, and the suffix must be there.
  EXPECT_EQ(Found(r, "POST", "/v1/models/:predict"), 0);
  EXPECT_EQ(Found(r, "POST", "/v1/models/mlp"), 0);
  EXPECT_EQ(Found(r, "POST", "/v1/models/mlp:predictx"), 0);
}

TEST(Router, UnknownPathIsNotFound) {
  Router<int> r = ApiLike();
  static const int kSentinel = -1;
  const int* h = &kSentinel;  // Find must reset it
  for (std::string_view path : {"/api/v1/nothing", "/api/v1/runs/x/y/z", "/api/v1", "/", "",
                                "/api/v2/runs", "/api/v1/runs/x/stopp"}) {
    RouteMatch m = r.Find("GET", path, &h);
    EXPECT_EQ(m.kind, Kind::kNotFound) << path;
    EXPECT_EQ(h, nullptr);
    EXPECT_TRUE(m.allow.empty());
  }
  // Longer than any route can be, and longer than the segments Find looks at.
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "/a";
  EXPECT_EQ(r.Find("GET", deep, &h).kind, Kind::kNotFound);
}

TEST(Router, WrongMethodListsTheAllowedOnes) {
  Router<int> r = ApiLike();
  const int* h = nullptr;
  RouteMatch m = r.Find("DELETE", "/api/v1/runs", &h);
  EXPECT_EQ(m.kind, Kind::kWrongMethod);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(m.allow, "GET, POST");
  m = r.Find("PUT", "/api/v1/runs/r1", &h);
  EXPECT_EQ(m.kind, Kind::kWrongMethod);
  EXPECT_EQ(m.allow, "GET, DELETE");
  m = r.Find("GET", "/api/v1/runs/r1/stop", &h);
  EXPECT_EQ(m.kind, Kind::kWrongMethod);
  EXPECT_EQ(m.allow, "POST");
  // Methods are case-sensitive (RFC 9110 §9.1).
  EXPECT_EQ(r.Find("get", "/api/v1/runs", &h).kind, Kind::kWrongMethod);
}

TEST(Router, EachAllowedMethodIsListedOnce) {
  Router<int> r;
  ASSERT_TRUE(r.AddAll({{"GET", "/m/{a}", 1}, {"GET", "/m/x", 2}, {"POST", "/m/{a}", 3}}).ok());
  const int* h = nullptr;
  EXPECT_EQ(r.Find("PUT", "/m/x", &h).allow, "GET, POST");
  // The first route added wins when two match.
  EXPECT_EQ(Found(r, "GET", "/m/x"), 1);
}

TEST(Router, TrailingSlashAndEmptySegmentsAreIgnored) {
  Router<int> r = ApiLike();
  PathParams p;
  EXPECT_EQ(Found(r, "GET", "/api/v1/runs/"), 1);
  EXPECT_EQ(Found(r, "GET", "/api/v1//runs"), 1);
  EXPECT_EQ(Found(r, "GET", "//api/v1/runs/r1//", &p), 3);
  EXPECT_EQ(p.Get("run"), "r1");
  // An empty segment is no parameter: "/runs//stop" is "/runs/stop", run "stop".
  EXPECT_EQ(Found(r, "GET", "/api/v1/runs//stop", &p), 3);
  EXPECT_EQ(p.Get("run"), "stop");
}

TEST(Router, RefusesMalformedPatterns) {
  for (std::string_view bad :
       {"", "api/v1", "/a/{", "/a/}", "/a/{}", "/a/{x}{y}", "/a/{x}-{y}", "/{a}/{b}/{c}/{d}/{e}"}) {
    Router<int> r;
    EXPECT_EQ(r.Add("GET", bad, 1).code(), Code::kInvalidArgument) << bad;
  }
  Router<int> r;
  EXPECT_TRUE(r.Add("GET", "/a/{x}", 1).ok());
  EXPECT_EQ(r.Add("GET", "/a/{x}", 2).code(), Code::kInvalidArgument);  // twice
  EXPECT_TRUE(r.Add("POST", "/a/{x}", 2).ok());
  EXPECT_EQ(r.Add("", "/b", 3).code(), Code::kInvalidArgument);
}

class FakeStream : public ResponseStream {
 public:
  bool Write(std::string_view d) override {
    data += d;
    return true;
  }
  void Close() override {}
  bool ClientGone() const override { return false; }
  std::string data;
};

class FakeResponder : public Responder {
 public:
  void Send(HttpResponse) override {}
  std::unique_ptr<ResponseStream> StartStream(int s, std::string ct, Headers h) override {
    status = s;
    content_type = std::move(ct);
    headers = std::move(h);
    return std::make_unique<FakeStream>();
  }
  int status = 0;
  std::string content_type;
  Headers headers;
};

TEST(Sse, StartEventStreamSetsTheTypeAndNoCache) {
  FakeResponder res;
  auto s = StartEventStream(res);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.content_type, "text/event-stream");
  EXPECT_EQ(FindHeader(res.headers, "cache-control"), "no-cache");
}

TEST(Sse, EventFormat) {
  EXPECT_EQ(SseEvent("log", R"({"line":"x"})"), "event: log\ndata: {\"line\":\"x\"}\n\n");
  EXPECT_EQ(SseEvent("state", "{}", 17), "id: 17\nevent: state\ndata: {}\n\n");
  EXPECT_EQ(SseEvent("end", ""), "event: end\ndata: \n\n");
  // A newline in the data would end the field: each line gets its own "data:".
  EXPECT_EQ(SseEvent("m", "a\nb"), "event: m\ndata: a\ndata: b\n\n");
  EXPECT_EQ(SseEvent("m", "a\n"), "event: m\ndata: a\ndata: \n\n");
  EXPECT_EQ(kSseKeepAlive, ": keep-alive\n\n");
}

TEST(StatusHttp, OneMappingForEveryServer) {
  EXPECT_EQ(HttpStatusFor(Status::OK()), 200);
  EXPECT_EQ(HttpStatusFor(Status::InvalidArgument("x")), 400);
  EXPECT_EQ(HttpStatusFor(Status::Msg(Code::kInvalidArgument, "run.idempotency_key_reused")), 422);
  EXPECT_EQ(HttpStatusFor(Status::NotFound("x")), 404);
  EXPECT_EQ(HttpStatusFor(Status::Msg(Code::kPermissionDenied, "api.unauthenticated")), 401);
  EXPECT_EQ(HttpStatusFor(Status::Msg(Code::kPermissionDenied, "run.forbidden")), 403);
  EXPECT_EQ(HttpStatusFor(Status(Code::kAlreadyExists, "x")), 409);
  EXPECT_EQ(HttpStatusFor(Status(Code::kFailedPrecondition, "x")), 409);
  EXPECT_EQ(HttpStatusFor(Status(Code::kResourceExhausted, "x")), 429);
  for (const char* id : {"state.disk_full", "snap.disk_full", "snap.reserve"}) {
    EXPECT_EQ(HttpStatusFor(Status::Msg(Code::kResourceExhausted, id)), 507) << id;
  }
  EXPECT_EQ(HttpStatusFor(Status(Code::kUnavailable, "x")), 503);
  // The API said 500 and `lathe serve` 503 for these; both say 503 now.
  EXPECT_EQ(HttpStatusFor(Status(Code::kDeadlineExceeded, "x")), 503);
  EXPECT_EQ(HttpStatusFor(Status(Code::kCancelled, "x")), 503);
  EXPECT_EQ(HttpStatusFor(Status(Code::kIoError, "x")), 500);
  EXPECT_EQ(HttpStatusFor(Status::Internal("x")), 500);
}

}  // namespace
}  // namespace lathe::net
