// data/openapi.yaml (generated from docs/api.md by scripts/openapi.py) and
// the daemon's route table name the same routes: every route documented, no
// documented route missing.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "lathe/api/server.h"
#include "lathe/common/embedded.h"
#include "lathe/common/yaml_json.h"

namespace lathe::api {
namespace {

TEST(OpenApi, TheDocumentAndTheRouteTableNameTheSameRoutes) {
  auto doc = YamlTextToJson(FindEmbedded("openapi.yaml"), "openapi.yaml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ((*doc)["openapi"], "3.0.3");
  std::set<std::pair<std::string, std::string>> documented, routed;
  for (const auto& [path, ops] : (*doc)["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      std::string upper = method;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      documented.emplace(upper, path);
      EXPECT_FALSE(op.value("description", "").empty()) << upper << " " << path;
    }
  }
  for (const auto& r : ApiServer::RoutePatterns()) routed.insert(r);
  for (const auto& r : routed) {
    EXPECT_TRUE(documented.count(r))
        << r.first << " " << r.second << " is routed but not in docs/api.md (scripts/openapi.py)";
  }
  for (const auto& d : documented) {
    EXPECT_TRUE(routed.count(d)) << d.first << " " << d.second
                                 << " is in docs/api.md but the daemon has no such route";
  }
}

}  // namespace
}  // namespace lathe::api
