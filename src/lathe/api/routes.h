// What the API's routes (routes_*.cc) share: one request as a route sees it,
// and the answers every route gives the same way. Internal to api/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "lathe/api/auth.h"
#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/daemon/daemon.h"
#include "lathe/net/http.h"
#include "lathe/net/router.h"

namespace lathe::api {

// One authenticated request matched to a route. `res` is the route's to answer
// through (Reply/Send) or to hand to a stream thread; `params` are views into
// `req.path` (copy them into anything that outlives the handler).
struct ApiCall {
  const net::HttpRequest& req;
  const daemon::Caller& caller;  // auth.caller
  const Authenticated& auth;     // how the caller proved it
  net::PathParams params;
  std::unique_ptr<net::Responder> res;

  std::string Param(std::string_view name) const { return std::string(params.Get(name)); }
  // Answers JSON: `ok_status` with the value, or the error of the status.
  void Reply(const Result<Json>& r, int ok_status = 200);
  void Send(net::HttpResponse r);
};

net::HttpResponse JsonResponse(int status, const Json& body);
// The status's catalog JSON ({"error": {code, id, args, message, en, zh}})
// with net::HttpStatusFor's code.
net::HttpResponse ErrorResponse(const Status& s);

// How a credential made for the caller was asked for, as listings show it:
// "socket", "daemon token", "token <id>", "session <id>".
std::string CreatedBy(const Authenticated& a);
// When the caller's credential ends (epoch ms): a token's expiry, a
// session's absolute end; 0 for the socket and the daemon's token. What it
// makes (a session, through a login code) ends no later.
int64_t CredentialEndMs(const Authenticated& a);

// An event as the API answers it: state::EventToJson and `text`, what a
// person reads of it in each language ({en, zh}, run/event_text.h).
Json EventJson(const state::EventRecord& e);
// {en, zh} of an English reason or waiting text read back against the
// catalog (run/event_text.h ReasonText); "" stays "".
Json BothLanguages(const std::string& english);

// `in` with & < > " ' as HTML entities: text and attribute values of a page.
std::string HtmlEscape(std::string_view in);

// "1", "true" or "yes".
bool Truthy(const std::optional<std::string>& v);

// The query parameter `name` as a whole number from 0 to `max`; `absent` when
// it is not given. InvalidArgument (api.bad_number, naming the parameter, the
// range and what was sent) for anything else: "abc", "-1", "1e3", "".
Result<int64_t> QueryNumber(const net::HttpRequest& req, std::string_view name, int64_t absent,
                            int64_t max);

}  // namespace lathe::api
