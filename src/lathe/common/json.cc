#include "lathe/common/json.h"

#include <fmt/format.h>

#include "lathe/common/i18n.h"

namespace lathe {

Result<Json> ParseJson(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Parse again with exceptions only to learn where it failed.
    try {
      Json unused = Json::parse(text.begin(), text.end());
    (void)unused;
    } catch (const Json::parse_error& e) {
      return Status::Msg(Code::kInvalidArgument, "json.malformed",
                         {{"offset", std::to_string(e.byte)}});
    } catch (const Json::exception&) {
      // e.g. out_of_range for a number such as 1E99999
    }
    return Status::Msg(Code::kInvalidArgument, "json.malformed", {{"offset", "?"}});
  }
  return j;
}

namespace {
template <typename T, typename Check>
Result<T> GetTyped(const Json& obj, std::string_view field, Check is_type, const char* type) {
  if (!obj.is_object()) {
    return Status::Msg(Code::kInvalidArgument, "json.not_object", {});
  }
  auto it = obj.find(std::string(field));
  if (it == obj.end()) return Status::NotFound(fmt::format("field '{}' is missing", field));
  if (!is_type(*it)) {
    return Status::Msg(Code::kInvalidArgument, "json.wrong_type",
                       {{"field", std::string(field)}, {"type", type}});
  }
  return it->template get<T>();
}
}  // namespace

Result<std::string> GetString(const Json& obj, std::string_view field) {
  return GetTyped<std::string>(obj, field, [](const Json& j) { return j.is_string(); }, "string");
}
Result<int64_t> GetInt(const Json& obj, std::string_view field) {
  return GetTyped<int64_t>(obj, field, [](const Json& j) { return j.is_number_integer(); },
                           "integer");
}
Result<bool> GetBool(const Json& obj, std::string_view field) {
  return GetTyped<bool>(obj, field, [](const Json& j) { return j.is_boolean(); }, "boolean");
}

Json StatusToJson(const Status& s) {
  Json err = {{"code", std::string(CodeName(s.code()))}, {"message", s.message()}};
  if (!s.msg_id().empty()) {
    err["id"] = s.msg_id();
    Json args = Json::object();
    for (const auto& a : s.args()) args[a.key] = a.value;
    err["args"] = args;
  }
  err["en"] = Localize(s, Lang::kEn);
  err["zh"] = Localize(s, Lang::kZh);
  return Json{{"error", err}};
}

Status StatusFromJson(const Json& body, Code fallback) {
  if (!body.is_object() || !body.contains("error")) {
    return Status(fallback, body.is_string() ? body.get<std::string>() : body.dump());
  }
  const Json& e = body["error"];
  if (e.is_string()) return Status(fallback, e.get<std::string>());
  Code code = e.contains("code") && e["code"].is_string()
                  ? CodeFromName(e["code"].get<std::string>())
                  : fallback;
  if (e.contains("id") && e["id"].is_string()) {
    MsgArgs args;
    if (e.contains("args") && e["args"].is_object()) {
      for (auto it = e["args"].begin(); it != e["args"].end(); ++it) {
        args.push_back({it.key(), it->is_string() ? it->get<std::string>() : it->dump()});
      }
    }
    if (Catalog::Default().Has(e["id"].get<std::string>())) {
      return Status::Msg(code, e["id"].get<std::string>(), std::move(args));
    }
  }
  return Status(code, e.value("message", e.dump()));
}

}  // namespace lathe
