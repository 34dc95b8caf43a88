// JSON helpers over nlohmann::json that return Status instead of throwing.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "lathe/common/status.h"

namespace lathe {

using Json = nlohmann::json;

// Documents nested deeper than this are refused (json.too_deep).
inline constexpr size_t kMaxJsonDepth = 256;

// Parses `text`. Errors are InvalidArgument: a syntax error with its byte
// offset (json.malformed); a number beyond a double's range, e.g. 1e400, with
// the field it is in, as "gpus", "command[1]" or "env.FOO"
// (json.number_out_of_range); a key given twice in one object
// (json.duplicate_key); nesting beyond kMaxJsonDepth (json.too_deep).
Result<Json> ParseJson(std::string_view text);
// For answers from Lathe's own daemon, which writes them with Json::dump: a
// plain parse (~25% faster on `lathe ps -a`), malformed text still an error
// (InvalidArgument), without ParseJson's field names and duplicate-key check,
// which are for what people write.
Result<Json> ParseJsonAnswer(std::string_view text);

// Whether `s` is UTF-8 that Json::dump accepts (it throws on anything else):
// a string from argv or a YAML file may not be.
bool IsValidUtf8(std::string_view s);

// Typed field access for request bodies and stored records. A missing field
// is NotFound; a field of the wrong type is InvalidArgument naming it.
Result<std::string> GetString(const Json& obj, std::string_view field);
Result<int64_t> GetInt(const Json& obj, std::string_view field);
Result<bool> GetBool(const Json& obj, std::string_view field);

// A message's arguments from a JSON object {name: value} (a stored event's,
// an error body's): strings as they are, other values as JSON text; none
// when `args` is not an object.
MsgArgs MsgArgsFromJson(const Json& args);

// The JSON body of an error, the same for the daemon's API, the deployments'
// front and `lathe serve`: {"error": English text, "code": CodeName, "msg_id",
// "args" (both only when the status has a catalog id), "en", "zh"}. "error"
// is a string because KServe v2 (which `lathe serve` speaks) says so. A caller
// may add fields of its own (an SSE error event adds "http").
Json StatusToJson(const Status& s);
// The inverse, for clients: rebuilds a Status (code, id, args, English
// message) from that shape, from the nested one of older daemons
// ({"error": {"code", "id", "args", "message", …}}) and from a bare
// {"error": text} (the HTTP layer's own answers; `fallback` is its code).
Status StatusFromJson(const Json& body, Code fallback);

}  // namespace lathe
