#include "lathe/common/json.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "lathe/common/i18n.h"

namespace lathe {

namespace {

// Json::parse's own handler, plus where in the document it is ("gpus",
// "command[1]", "env.FOO"), so that a number out of a double's range (which
// nlohmann reports without a position) names its field, and a depth bound:
// the parser is iterative, but dump() and the validators that print a value
// recurse.
class PathSax {
 public:
  static constexpr size_t kMaxPathShown = 100;  // bytes of a field's path in a message

  explicit PathSax(Json& out) : dom_(out, /*allow_exceptions=*/false) {}

  bool null() { return Value() && dom_.null(); }
  bool boolean(bool v) { return Value() && dom_.boolean(v); }
  bool number_integer(Json::number_integer_t v) { return Value() && dom_.number_integer(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return Value() && dom_.number_unsigned(v); }
  bool number_float(Json::number_float_t v, const Json::string_t& s) {
    return Value() && dom_.number_float(v, s);
  }
  bool string(Json::string_t& v) { return Value() && dom_.string(v); }
  bool binary(Json::binary_t& v) { return Value() && dom_.binary(v); }
  bool start_object(std::size_t n) { return Open(false) && dom_.start_object(n); }
  bool key(Json::string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    // nlohmann keeps the last of two equal keys; a person meant one of them.
    if (!f.Remember(k)) {
      duplicate_ = true;
      return false;
    }
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return Open(true) && dom_.start_array(n); }
  bool end_array() {
    frames_.pop_back();
    return dom_.end_array();
  }
  template <typename Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    error_ = e.id;
    if (error_ == 406) Value();  // the number that failed is an element of its array too
    byte_ = position;
    token_ = token;
    return dom_.parse_error(position, token, e);
  }

  Status Error() const {
    // 406: nlohmann's "number overflow" (1e400); the token is the number.
    if (error_ == 406) {
      return Status::Msg(Code::kInvalidArgument, "json.number_out_of_range",
                         {{"field", Path()}, {"value", token_.substr(0, 40)}});
    }
    if (duplicate_) {
      return Status::Msg(Code::kInvalidArgument, "json.duplicate_key", {{"field", Path()}});
    }
    if (too_deep_) {
      return Status::Msg(Code::kInvalidArgument, "json.too_deep",
                         {{"field", Path()}, {"max", std::to_string(kMaxJsonDepth)}});
    }
    return Status::Msg(Code::kInvalidArgument, "json.malformed",
                       {{"offset", std::to_string(byte_)}});
  }

 private:
  struct Frame {
    bool array;
    size_t index;     // arrays: one past the element being read
    std::string key;  // objects: the member being read
    // Objects: the members read so far; a short list searched in place (most
    // objects have a handful of keys), a set once it grows.
    std::vector<std::string> few;
    std::set<std::string> many;
    bool Remember(const std::string& k) {
      constexpr size_t kFew = 64;
      if (many.empty()) {
        if (std::find(few.begin(), few.end(), k) != few.end()) return false;
        if (few.size() < kFew) {
          few.push_back(k);
          return true;
        }
        many.insert(few.begin(), few.end());
      }
      return many.insert(k).second;
    }
  };

  bool Value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }
  bool Open(bool array) {
    Value();
    if (frames_.size() >= kMaxJsonDepth) {
      too_deep_ = true;
      return false;
    }
    frames_.push_back({array, 0, {}, {}, {}});
    return true;
  }
  std::string Path() const {
    std::string p;
    for (const auto& f : frames_) {
      if (f.array) {
        p += "[" + std::to_string(f.index == 0 ? 0 : f.index - 1) + "]";
      } else {
        p += (p.empty() ? "" : ".") + f.key;
      }
    }
    if (p.size() > kMaxPathShown) p = p.substr(0, kMaxPathShown) + "...";
    return p.empty() ? "(top level)" : p;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::vector<Frame> frames_;
  int error_ = 0;
  bool too_deep_ = false;
  bool duplicate_ = false;
  size_t byte_ = 0;
  std::string token_;
};

}  // namespace

bool IsValidUtf8(std::string_view s) {
  // The serializer's own rules, not a second copy of them: dropping invalid
  // bytes and replacing them give the same text only when there are none.
  Json j = std::string(s);
  return j.dump(-1, ' ', false, Json::error_handler_t::ignore) ==
         j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<Json> ParseJson(std::string_view text) {
  Json j;
  PathSax sax(j);
  if (!Json::sax_parse(text.begin(), text.end(), &sax)) return sax.Error();
  return j;
}

Result<Json> ParseJsonAnswer(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("not valid JSON");
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
  return GetTyped<std::string>(
      obj, field, [](const Json& j) { return j.is_string(); }, "string");
}
Result<int64_t> GetInt(const Json& obj, std::string_view field) {
  return GetTyped<int64_t>(
      obj, field, [](const Json& j) { return j.is_number_integer(); }, "integer");
}
Result<bool> GetBool(const Json& obj, std::string_view field) {
  return GetTyped<bool>(
      obj, field, [](const Json& j) { return j.is_boolean(); }, "boolean");
}

MsgArgs MsgArgsFromJson(const Json& args) {
  MsgArgs out;
  if (!args.is_object()) return out;
  for (auto it = args.begin(); it != args.end(); ++it) {
    out.push_back({it.key(), it->is_string() ? it->get<std::string>() : it->dump()});
  }
  return out;
}

Json StatusToJson(const Status& s) {
  Json j = {{"error", s.message()}, {"code", std::string(CodeName(s.code()))}};
  if (!s.msg_id().empty()) {
    j["msg_id"] = s.msg_id();
    Json args = Json::object();
    for (const auto& a : s.args()) args[a.key] = a.value;
    j["args"] = args;
  }
  j["en"] = Localize(s, Lang::kEn);
  j["zh"] = Localize(s, Lang::kZh);
  return j;
}

Status StatusFromJson(const Json& body, Code fallback) {
  if (!body.is_object() || !body.contains("error")) {
    return Status(fallback, body.is_string() ? body.get<std::string>() : body.dump());
  }
  const Json& error = body["error"];
  // A daemon before the flat shape nested the fields under "error", with the
  // id as "id" and the text as "message".
  const bool nested = error.is_object();
  const Json& e = nested ? error : body;
  const char* id_key = nested ? "id" : "msg_id";
  Code code = e.contains("code") && e["code"].is_string()
                  ? CodeFromName(e["code"].get<std::string>())
                  : fallback;
  if (e.contains(id_key) && e[id_key].is_string()) {
    const std::string id = e[id_key].get<std::string>();
    if (Catalog::Default().Has(id)) {
      return Status::Msg(code, id, MsgArgsFromJson(e.value("args", Json())));
    }
  }
  if (nested) return Status(code, e.value("message", e.dump()));
  return Status(code, error.is_string() ? error.get<std::string>() : error.dump());
}

}  // namespace lathe
