// The daemon's pages under /ui/ (docs/api.md, "Web UI and browser sessions").
//
//   GET /ui/login?code=CODE  redeems a one-time login code (scope "ui") and
//                            answers 303 to /ui/ with the session's cookie;
//                            a used, expired or unknown code: 401 and a page
//                            that says so, in English and Chinese.
//   GET /ui/assets/NAME      the web UI's content-hashed files (lathe/web/assets.h):
//                            cached for a year, gzip when the client takes it;
//                            no credential (they hold nothing of anyone's).
//   GET /ui/, /ui/PAGE       the web UI's index.html (no-store), whatever the
//                            page: the client's router shows it. The UI signs in
//                            and reads everything through /api/v1.
//
// Nothing here is ever framed or sends a Referer; the UI's pages run only the
// script of their own origin (CSP script-src 'self', no inline script).
#include <fmt/format.h>

#include "lathe/api/host_check.h"
#include "lathe/api/routes.h"
#include "lathe/api/server.h"
#include "lathe/common/i18n.h"
#include "lathe/common/log.h"
#include "lathe/net/status_http.h"
#include "lathe/web/assets.h"

namespace lathe::api {

std::string HtmlEscape(std::string_view in) {
  std::string out;
  for (char c : in) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// One catalog text in both languages, as two paragraphs.
std::string Both(std::string_view id, const MsgArgs& args = {}) {
  return fmt::format("<p lang=\"en\">{}</p>\n<p lang=\"zh-CN\">{}</p>\n",
                     HtmlEscape(Tr(id, Lang::kEn, args)), HtmlEscape(Tr(id, Lang::kZh, args)));
}

constexpr std::string_view kAssetsPrefix = "/ui/assets/";

// The web UI's policy: its own script, style and API only (connect-src covers
// fetch and EventSource); never framed; forms post nowhere else.
constexpr std::string_view kUiCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'";

net::HttpResponse Page(int status, const std::string& body) {
  net::HttpResponse r;
  r.status = status;
  r.content_type = "text/html; charset=utf-8";
  r.body =
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Lathe</title></head>\n"
      "<body>\n<h1>Lathe</h1>\n" +
      body + "</body></html>\n";
  r.headers = {{"Cache-Control", "no-store"},
               {"Referrer-Policy", "no-referrer"},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Frame-Options", "DENY"},
               {"Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"}};
  return r;
}

bool IsWildcard(const std::string& h) { return h.empty() || h == "0.0.0.0" || h == "::"; }

std::string Bracketed(const std::string& h) {
  return h.find(':') != std::string::npos && h.front() != '[' ? "[" + h + "]" : h;
}

// An embedded file of the web UI; gzip-encoded when the client takes it.
net::HttpResponse AssetResponse(const net::HttpRequest& req, const web::Asset& a) {
  net::HttpResponse r;
  r.content_type = std::string(a.content_type);
  bool gzip = !a.gzip.empty() && web::AcceptsGzip(req.Header("Accept-Encoding"));
  r.body = std::string(gzip ? a.gzip : a.body);
  if (gzip) r.headers.emplace_back("Content-Encoding", "gzip");
  r.headers.emplace_back("Vary", "Accept-Encoding");
  r.headers.emplace_back("Cache-Control",
                         a.immutable ? "public, max-age=31536000, immutable" : "no-store");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Content-Security-Policy", std::string(kUiCsp));
  return r;
}

}  // namespace

bool ApiServer::IsUiPath(std::string_view path) {
  return path == "/ui" || path.rfind("/ui/", 0) == 0;
}

std::string ApiServer::LoginUrl(const net::HttpRequest& req, const std::string& code) const {
  std::string authority;
  if (IsLoopbackListenHost(opts_.host)) {
    authority = fmt::format("localhost:{}", port_);
  } else if (!IsWildcard(opts_.host)) {
    authority = fmt::format("{}:{}", Bracketed(opts_.host), port_);
  } else if (!req.peer && !req.Header("Host").empty()) {
    authority = std::string(req.Header("Host"));  // allowlisted: how this client reached us
  } else if (!opts_.allowed_hosts.empty()) {
    authority = fmt::format("{}:{}", Bracketed(opts_.allowed_hosts.front()), port_);
  } else {
    authority = fmt::format("localhost:{}", port_);
  }
  return fmt::format("{}://{}/ui/login?code={}", opts_.tls_on() ? "https" : "http", authority,
                     code);
}

void ApiServer::HandleUi(const net::HttpRequest& req, std::unique_ptr<net::Responder> res) {
  if (req.method != "GET") {
    net::HttpResponse r = ErrorResponse(
        Status::Msg(Code::kInvalidArgument, "api.bad_method",
                    {{"method", req.method}, {"path", req.path}, {"allowed", "GET"}}));
    r.status = 405;
    r.headers.emplace_back("Allow", "GET");
    res->Send(std::move(r));
    return;
  }
  if (req.path == "/ui") {
    net::HttpResponse r = Page(303, "");
    r.headers.emplace_back("Location", "/ui/");
    res->Send(std::move(r));
  } else if (req.path == "/ui/login") {
    UiLogin(req, *res);
  } else if (req.path.rfind(kAssetsPrefix, 0) == 0) {
    const web::Asset* a = web::FindAsset(std::string_view(req.path).substr(4));  // "assets/..."
    res->Send(a && a->immutable ? AssetResponse(req, *a) : Page(404, Both("ui.not_found")));
  } else {
    res->Send(AssetResponse(req, *web::FindAsset("index.html")));
  }
}

void ApiServer::UiLogin(const net::HttpRequest& req, net::Responder& res) {
  int64_t retry_after_s = 0;
  std::string code = req.QueryParam("code").value_or("");
  auto issued = auth_->RedeemCode(req, code, kUiScope, &retry_after_s);
  if (!issued.ok()) {
    if (retry_after_s > 0) {
      net::HttpResponse r = Page(429, Both(issued.status().msg_id(), issued.status().args()));
      r.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
      res.Send(std::move(r));
      return;
    }
    if (!issued.status().IsPermissionDenied()) {
      res.Send(Page(net::HttpStatusFor(issued.status()),
                    Both(issued.status().msg_id().empty() ? "ui.error" : issued.status().msg_id(),
                         issued.status().args())));
      return;
    }
    res.Send(Page(401, Both("ui.code_invalid",
                            {{"seconds", std::to_string(opts_.sessions.code_ttl_ms / 1000)}})));
    return;
  }
  std::string cookie =
      fmt::format("{}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}", kSessionCookie,
                  issued->cookie_value, opts_.sessions.absolute_ttl_ms / 1000);
  if (opts_.tls_on()) cookie += "; Secure";
  spdlog::info("api: browser session {} started for {} (uid {})", issued->record.id,
               issued->record.user, issued->record.uid);
  net::HttpResponse r = Page(303, "");
  r.headers.emplace_back("Location", "/ui/");
  r.headers.emplace_back("Set-Cookie", cookie);
  res.Send(std::move(r));
}

}  // namespace lathe::api
