#include "lathe/common/yaml_json.h"

#include <cstdlib>

namespace lathe {

Json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& x : n) a.push_back(YamlToJson(x));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string& v = n.Scalar();
      if (n.Tag() == "?") {  // plain scalars may be numbers, booleans or null
        if (v == "true" || v == "false") return v == "true";
        if (v == "null" || v == "~") return nullptr;
        char* end = nullptr;
        long long i = std::strtoll(v.c_str(), &end, 10);
        if (!v.empty() && *end == '\0') return i;
        double d = std::strtod(v.c_str(), &end);
        if (!v.empty() && *end == '\0') return d;
      }
      return v;
    }
    default:
      return nullptr;
  }
}

}  // namespace lathe
