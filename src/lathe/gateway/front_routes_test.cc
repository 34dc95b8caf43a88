#include "lathe/gateway/front_routes.h"

#include <gtest/gtest.h>

#include "lathe/common/json.h"

namespace lathe::gateway {
namespace {

Json Good() {
  return Json::parse(R"({"version": 1, "generation": 12,
    "deployments": [
     {"name": "digits", "uid": 1001, "public": false,
      "keys": [{"id": "k0123456789", "sha256": ")" +
                     std::string(64, 'a') + R"(", "expires_ms": 0}],
      "idempotent": false, "health_path": "/v2/health/ready", "replicas_wanted": 2,
      "hold": true, "hold_ms": 5000, "max_held": 7, "metrics_path": "/metrics",
      "traffic": {"digits/3": 90, "digits/4": 10},
      "replicas": [{"id": "r1", "socket": "/run/a.sock", "uid": 1001, "version": "digits/3",
                    "metadata_path": "/v2/models/digits"},
                   {"id": "r2", "socket": "/run/b.sock", "uid": 1001, "version": "digits/4",
                    "draining": true}],
      "a_field_of_a_later_daemon": {"ignored": true}},
     {"name": "echo", "uid": 0, "public": true}]})");
}

// The error of `mutate`d Good(): its catalog id and the field it names.
std::pair<std::string, std::string> ErrorOf(const std::function<void(Json&)>& mutate) {
  Json j = Good();
  mutate(j);
  auto r = ParseRoutes(j.dump());
  if (r.ok()) return {"ok", ""};
  std::string field;
  for (const auto& a : r.status().args()) {
    if (a.key == "field") field = a.value;
  }
  return {r.status().msg_id(), field};
}

TEST(FrontRoutes, ParsesEveryFieldAndDefaultsTheRest) {
  auto r = ParseRoutes(Good().dump());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->generation, 12);
  ASSERT_EQ(r->deployments.size(), 2u);
  const Route& d = r->deployments[0];
  EXPECT_EQ(d.name, "digits");
  EXPECT_EQ(d.uid, 1001u);
  EXPECT_FALSE(d.is_public);
  ASSERT_EQ(d.keys.size(), 1u);
  EXPECT_EQ(d.keys[0].id, "k0123456789");
  EXPECT_FALSE(d.idempotent);
  EXPECT_TRUE(d.hold);
  EXPECT_EQ(d.hold_ms, 5000);
  EXPECT_EQ(d.max_held, 7);
  EXPECT_EQ(d.replicas_wanted, 2);
  EXPECT_EQ(d.traffic.at("digits/4"), 10);
  ASSERT_EQ(d.replicas.size(), 2u);
  EXPECT_TRUE(d.replicas[1].draining);
  EXPECT_FALSE(d.replicas[0].draining);
  EXPECT_EQ(d.metrics_path, "/metrics");
  EXPECT_EQ(d.replicas[0].metadata_path, "/v2/models/digits");
  EXPECT_EQ(d.replicas[1].metadata_path, "");
  const Route* e = r->Find("echo");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->is_public);
  EXPECT_TRUE(e->idempotent);
  EXPECT_FALSE(e->hold);
  EXPECT_EQ(e->hold_ms, 30000);
  EXPECT_EQ(e->max_held, 100);
  EXPECT_EQ(e->health_path, "/v2/health/ready");
  EXPECT_EQ(e->metrics_path, "");  // none read
  EXPECT_TRUE(e->replicas.empty());
  EXPECT_EQ(r->Find("nope"), nullptr);
}

TEST(FrontRoutes, BadFieldsAreNamed) {
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(ErrorOf([](Json& j) { j["version"] = 2; }), P("gateway.routes_version", "version"));
  EXPECT_EQ(ErrorOf([](Json& j) { j.erase("version"); }), P("gateway.routes_missing", "version"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"] = "x"; }),
            P("gateway.routes_type", "deployments"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["name"] = "Bad Name"; }),
            P("gateway.routes_name", "deployments[0].name"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][1]["name"] = "digits"; }),
            P("gateway.routes_duplicate", "deployments[1].name"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0].erase("uid"); }),
            P("gateway.routes_missing", "deployments[0].uid"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["uid"] = -1; }),
            P("gateway.routes_range", "deployments[0].uid"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["public"] = "yes"; }),
            P("gateway.routes_type", "deployments[0].public"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["keys"][0]["sha256"] = "abc"; }),
            P("gateway.routes_sha256", "deployments[0].keys[0].sha256"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["health_path"] = "health"; }),
            P("gateway.routes_health_path", "deployments[0].health_path"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["metrics_path"] = "metrics"; }),
            P("gateway.routes_health_path", "deployments[0].metrics_path"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["replicas"][0]["metadata_path"] = "/a b"; }),
            P("gateway.routes_health_path", "deployments[0].replicas[0].metadata_path"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["hold_ms"] = 3600001; }),
            P("gateway.routes_range", "deployments[0].hold_ms"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["max_held"] = 1.5; }),
            P("gateway.routes_type", "deployments[0].max_held"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["traffic"]["digits/3"] = -5; }),
            P("gateway.routes_range", "deployments[0].traffic.digits/3"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["replicas"][1]["socket"] = "rel.sock"; }),
            P("gateway.routes_socket", "deployments[0].replicas[1].socket"));
  EXPECT_EQ(ErrorOf([](Json& j) {
              j["deployments"][0]["replicas"][1]["socket"] = "/" + std::string(107, 's');
            }),
            P("gateway.routes_socket", "deployments[0].replicas[1].socket"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["replicas"][1]["id"] = "r1"; }),
            P("gateway.routes_duplicate", "deployments[0].replicas[1].id"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["replicas"][0]["id"] = "a b"; }),
            P("gateway.routes_text", "deployments[0].replicas[0].id"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["replicas"][0].erase("socket"); }),
            P("gateway.routes_missing", "deployments[0].replicas[0].socket"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["replicas"][0]["draining"] = 1; }),
            P("gateway.routes_type", "deployments[0].replicas[0].draining"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["name"] = "a/b/c"; }),
            P("gateway.routes_name", "deployments[0].name"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["ref"] = "alice/other"; }),
            P("gateway.routes_name", "deployments[0].ref"));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][0]["ref"] = "alice/digits"; }), P("ok", ""));
  EXPECT_EQ(ErrorOf([](Json& j) { j["deployments"][1]["name"] = "bob/digits"; }), P("ok", ""));
  EXPECT_EQ(ParseRoutes("{not json").status().msg_id(), "json.malformed");
  EXPECT_EQ(ParseRoutes("[]").status().msg_id(), "gateway.routes_type");
}

}  // namespace
}  // namespace lathe::gateway
