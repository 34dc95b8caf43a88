#include "lathe/common/yaml_json.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "lathe/common/i18n.h"

namespace lathe {
namespace {

class Converter {
 public:
  Converter(std::string_view file, const YamlLimits& limits) : file_(file), limits_(limits) {}

  Result<Json> Convert(const YAML::Node& n, int depth) {
    if (++nodes_ > limits_.max_nodes) return TooLarge("yaml.too_many_nodes", limits_.max_nodes);
    switch (n.Type()) {
      case YAML::NodeType::Sequence: {
        if (depth >= limits_.max_depth) return TooDeep(n);
        Json a = Json::array();
        for (const auto& x : n) {
          ASSIGN_OR_RETURN(Json v, Convert(x, depth + 1));
          a.push_back(std::move(v));
        }
        return a;
      }
      case YAML::NodeType::Map: {
        if (depth >= limits_.max_depth) return TooDeep(n);
        Json o = Json::object();
        for (const auto& kv : n) {
          if (!kv.first.IsScalar()) {
            return Status::Msg(Code::kInvalidArgument, "yaml.bad_key",
                               {{"file", file_}, {"line", Line(kv.first)}});
          }
          const std::string& key = kv.first.Scalar();
          RETURN_IF_ERROR(CountBytes(key.size()));
          if (o.contains(key)) {
            return Status::Msg(Code::kInvalidArgument, "yaml.duplicate_key",
                               {{"file", file_}, {"key", key}, {"line", Line(kv.first)}});
          }
          ASSIGN_OR_RETURN(Json v, Convert(kv.second, depth + 1));
          o[key] = std::move(v);
        }
        return o;
      }
      case YAML::NodeType::Scalar:
        RETURN_IF_ERROR(CountBytes(n.Scalar().size()));
        return Scalar(n);
      default:
        return Json(nullptr);
    }
  }

 private:
  static Json Scalar(const YAML::Node& n) {
    const std::string& v = n.Scalar();
    if (n.Tag() != "?" || v.empty()) return v;  // quoted or tagged: a string
    if (v == "true" || v == "false") return v == "true";
    if (v == "null" || v == "~") return nullptr;
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(v.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return i;
    errno = 0;
    double d = std::strtod(v.c_str(), &end);
    // Out of a double's range (1e400): kept as written, so the field's own
    // check names it, rather than an infinity JSON cannot carry.
    if (*end == '\0' && errno == 0) return d;
    return v;
  }

  static std::string Line(const YAML::Node& n) { return std::to_string(n.Mark().line + 1); }

  Status CountBytes(size_t n) {
    scalar_bytes_ += n;
    if (scalar_bytes_ > limits_.max_scalar_bytes)
      return TooLarge("yaml.too_many_bytes", limits_.max_scalar_bytes);
    return Status::OK();
  }

  Status TooLarge(const char* id, size_t limit) const {
    return Status::Msg(Code::kInvalidArgument, id,
                       {{"file", file_}, {"limit", std::to_string(limit)}});
  }

  Status TooDeep(const YAML::Node& n) const {
    return Status::Msg(
        Code::kInvalidArgument, "yaml.too_deep",
        {{"file", file_}, {"max", std::to_string(limits_.max_depth)}, {"line", Line(n)}});
  }

  const std::string file_;
  const YamlLimits limits_;
  size_t nodes_ = 0;
  size_t scalar_bytes_ = 0;
};

}  // namespace

Result<Json> YamlToJson(const YAML::Node& n, std::string_view file, const YamlLimits& limits) {
  Converter c(file, limits);
  return c.Convert(n, 0);
}

Status YamlSyntaxError(const YAML::Exception& e, std::string_view file) {
  // yaml-cpp's messages (yaml-cpp/exceptions.h ErrorMsg) those who write
  // YAML by hand meet most; the others are said in its English.
  static constexpr std::pair<const char*, const char*> kKnown[] = {
      {YAML::ErrorMsg::END_OF_MAP, "yaml.syntax.end_of_map"},
      {YAML::ErrorMsg::END_OF_MAP_FLOW, "yaml.syntax.end_of_map_flow"},
      {YAML::ErrorMsg::END_OF_SEQ, "yaml.syntax.end_of_seq"},
      {YAML::ErrorMsg::END_OF_SEQ_FLOW, "yaml.syntax.end_of_seq_flow"},
      {YAML::ErrorMsg::MAP_KEY, "yaml.syntax.map_key"},
      {YAML::ErrorMsg::MAP_VALUE, "yaml.syntax.map_value"},
      {YAML::ErrorMsg::BLOCK_ENTRY, "yaml.syntax.block_entry"},
      {YAML::ErrorMsg::FLOW_END, "yaml.syntax.flow_end"},
      {YAML::ErrorMsg::TAB_IN_INDENTATION, "yaml.syntax.tab"},
      {YAML::ErrorMsg::EOF_IN_SCALAR, "yaml.syntax.eof_in_scalar"},
      {YAML::ErrorMsg::UNKNOWN_ANCHOR, "yaml.syntax.unknown_anchor"},
  };
  if (e.mark.is_null()) {
    return Status::Msg(Code::kInvalidArgument, "spec.yaml_error",
                       {{"file", std::string(file)}, {"detail", e.msg}});
  }
  MsgArgs at{{"file", std::string(file)},
             {"line", std::to_string(e.mark.line + 1)},
             {"column", std::to_string(e.mark.column + 1)}};
  for (const auto& [english, id] : kKnown) {
    if (e.msg == english) return Status::Msg(Code::kInvalidArgument, id, at);
  }
  at.push_back({"detail", e.msg});
  return Status::Msg(Code::kInvalidArgument, "spec.yaml_error_at", at);
}

Result<Json> YamlTextToJson(std::string_view text, std::string_view file) {
  try {
    return YamlToJson(YAML::Load(std::string(text)), file);
  } catch (const YAML::Exception& e) {
    return YamlSyntaxError(e, file);
  }
}

}  // namespace lathe
