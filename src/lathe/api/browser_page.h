// How the CLI opens a link that carries a one-time sign-in code (`lathe ui`,
// `lathe open --browser`, `lathe notebook open|start --browser`) without the
// code ever being in a process's command line or environment, which every
// local user can read in /proc (docs/security.md, "Opening a browser"):
//
//   1. the link goes into a small HTML page (mode 0600) in a directory of the
//      user's alone (0700: $XDG_RUNTIME_DIR/lathe/browser, else
//      $XDG_CACHE_HOME/lathe/browser or ~/.cache/lathe/browser), made without
//      following symlinks (os/private_dir.h);
//   2. `xdg-open` is given the page's path, which carries nothing secret;
//   3. the page sends the browser on to the link at once (a script, and a meta
//      refresh where scripts are off).
//
// The code is good for 60 s and once, so a page that outlives it holds
// nothing of use; pages older than kStaleSignInPageMs are removed by the next
// call. Thread-safety: the functions may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::api {

// Pages at least this old are removed when the next one is written.
inline constexpr int64_t kStaleSignInPageMs = 120'000;
// Sign-in pages are named kSignInPagePrefix + a random id + ".html".
inline constexpr std::string_view kSignInPagePrefix = "signin-";

// The page that takes a browser to `url` (http:// or https://, made only of
// URL characters other than quotes and backslashes): InvalidArgument for
// anything else, so that nothing in it is ever taken for markup or script.
Result<std::string> SignInPageHtml(std::string_view url);

// The directories a page may go in, the first that works being used:
// $XDG_RUNTIME_DIR/lathe/browser, then $XDG_CACHE_HOME/lathe/browser or
// $HOME/.cache/lathe/browser — each only where the variable is an absolute
// path to a directory this user owns.
std::vector<std::string> SignInPageDirs();

// Writes the page for `url` in `dir` (made private first; older pages there
// removed) and returns its path.
Result<std::string> WriteSignInPage(const std::string& dir, std::string_view url, int64_t now_ms);

// Opens `url` in the user's browser through a page as above (xdg-open, at most
// 10 s). The page stays for the browser to read, until a later call finds it
// stale; when xdg-open fails it is removed at once.
Status OpenInBrowser(std::string_view url);

}  // namespace lathe::api
