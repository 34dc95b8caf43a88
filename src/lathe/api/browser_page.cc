#include "lathe/api/browser_page.h"

#include <cstdlib>

#include <fmt/format.h>

#include "lathe/common/ids.h"
#include "lathe/os/clock.h"
#include "lathe/os/command.h"
#include "lathe/os/files.h"
#include "lathe/os/private_dir.h"

namespace lathe::api {
namespace {

constexpr int64_t kBrowserTimeoutMs = 10'000;

// RFC 3986's characters less the single quote: nothing here ends an HTML
// attribute, a JavaScript string or a <script> element.
constexpr std::string_view kUrlChars =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    "-._~:/?#[]@!$&()*+,;=%";

// $NAME when it is an absolute path to a directory of this user's own (XDG:
// a relative one is ignored; one inherited from another user, through sudo,
// is not written in).
std::string OwnDirFromEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v != '/' || !os::IsOwnDirectory(v)) return "";
  return v;
}

// `url` with '&' as an HTML attribute needs it (it is the only character of
// kUrlChars that means something there).
std::string InAttribute(std::string_view url) {
  std::string out;
  for (char c : url) out += c == '&' ? std::string("&amp;") : std::string(1, c);
  return out;
}

}  // namespace

Result<std::string> SignInPageHtml(std::string_view url) {
  const bool web = url.starts_with("http://") || url.starts_with("https://");
  if (!web || url.find_first_not_of(kUrlChars) != std::string_view::npos) {
    return Status::InvalidArgument("not a link a sign-in page can carry");
  }
  const std::string attr = InAttribute(url);
  return fmt::format(
      "<!doctype html>\n<html><head><meta charset=\"utf-8\">\n"
      "<meta name=\"referrer\" content=\"no-referrer\">\n"
      "<meta http-equiv=\"refresh\" content=\"0; url={0}\">\n"
      "<title>Lathe</title>\n<script>location.replace('{1}');</script>\n"
      "</head><body><p><a href=\"{0}\">Lathe</a></p></body></html>\n",
      attr, url);
}

std::vector<std::string> SignInPageDirs() {
  std::vector<std::string> dirs;
  if (std::string run = OwnDirFromEnv("XDG_RUNTIME_DIR"); !run.empty()) {
    dirs.push_back(run + "/lathe/browser");
  }
  if (std::string cache = OwnDirFromEnv("XDG_CACHE_HOME"); !cache.empty()) {
    dirs.push_back(cache + "/lathe/browser");
  } else if (std::string home = OwnDirFromEnv("HOME"); !home.empty()) {
    dirs.push_back(home + "/.cache/lathe/browser");
  }
  return dirs;
}

Result<std::string> WriteSignInPage(const std::string& dir, std::string_view url, int64_t now_ms) {
  ASSIGN_OR_RETURN(std::string html, SignInPageHtml(url));
  ASSIGN_OR_RETURN(os::Fd fd, os::OpenPrivateDir(dir));
  // Best effort: stale sign-in pages are swept again at the next open.
  (void)os::RemoveOldFilesAt(fd.get(), dir, kSignInPagePrefix, now_ms - kStaleSignInPageMs);
  const std::string name = fmt::format("{}{}.html", kSignInPagePrefix, NewId(""));
  RETURN_IF_ERROR(os::WriteNewFileAt(fd.get(), dir, name, html));
  return dir + "/" + name;
}

Status OpenInBrowser(std::string_view url) {
  Status last = Status::FailedPrecondition(
      "no directory of this user's for the sign-in page ($XDG_RUNTIME_DIR, $HOME)");
  std::string page;
  for (const std::string& dir : SignInPageDirs()) {
    auto written = WriteSignInPage(dir, url, os::RealClock().NowMs());
    if (written.ok()) {
      page = *written;
      break;
    }
    last = written.status();
  }
  if (page.empty()) return last;
  auto opened = os::RunCommand({"xdg-open", page}, kBrowserTimeoutMs);
  Status st = opened.ok() ? Status::OK() : opened.status();
  if (st.ok() && opened->exit_code != 0) {
    st = Status::Unavailable("xdg-open: exit " + std::to_string(opened->exit_code));
  }
  if (!st.ok()) (void)os::RemoveFile(page);  // no browser will read it
  return st;
}

}  // namespace lathe::api
