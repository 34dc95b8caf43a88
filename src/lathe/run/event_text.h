// Run states, events and reasons as a person reads them, in their language.
//
// The API keeps English: state names ("queued", "failed"), each event's
// `message` and a run's `reason`. What a person reads is rendered from the
// message catalog (data/messages_cli.yaml, ids run_state.*, event_type.* and
// event.*), in this
// order (docs/api.md, "Events"):
//   1. the event's data names its message: data.msg_id with data.msg_args
//      (an object; a value that is itself {msg_id, msg_args} is rendered the
//      same way, so a nested reason is translated too);
//   2. else the English message is read back against the English texts of
//      the event.* entries (then of the whole catalog) ("started, pid {pid}" matches "started, pid
//      42"), a message of parts joined by "; " part by part; the arguments named reason, detail or
//      why are read back the same way against the whole catalog;
//   3. else the English message itself (for a state event, after the state
//      it went to, taken from data.to).
// The rules use only the catalog, so the web UI can apply them to the
// catalog's JSON. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"

namespace lathe::run {

// "queued" → "排队中" (run_state.queued); an unknown name is shown as it is.
std::string StateLabel(std::string_view state, Lang lang);
// "state", "warning", "checkpoint"… (event_type.*); an unknown type as it is.
std::string EventTypeLabel(std::string_view type, Lang lang);
// An event as the API returns it: {type, message, data}.
std::string EventText(const Json& event, Lang lang);
// A run's reason (why it failed, stopped or is lost), e.g. "exited with code 1".
std::string ReasonText(std::string_view english, Lang lang);
// Catalog arguments from JSON, with those that hold a run's reason in English
// (keys "reason" and "why": why a replica failed, why it waits) in `lang`.
MsgArgs ArgsWithReasons(const Json& args, Lang lang);

// For the daemon: the event data that names catalog text `id` with `args`
// ({"msg_id": id, "msg_args": {…}}, merged into `data`), and the English
// message to store beside it (Tr(id, kEn, args)).
struct EventMessage {
  std::string message;
  Json data;
};
EventMessage MakeEventMessage(std::string_view id, const MsgArgs& args, Json data = Json::object());

// The catalog entry whose English text, its placeholders taken as wildcards,
// is all of `english`: its id and the values the placeholders stood for.
// Only entries whose id starts with `id_prefix`; an empty prefix searches
// the whole catalog, but only entries with at least 6 characters of their
// own text (a bare "{detail}" matches everything).
struct EnglishMatch {
  std::string id;
  MsgArgs args;
};
std::optional<EnglishMatch> MatchEnglish(std::string_view english, std::string_view id_prefix);

}  // namespace lathe::run
