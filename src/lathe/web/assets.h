// The web UI's built files, embedded into the binary at build time: web/build.mjs
// bundles web/src and writes them as byte arrays (web_assets_data.cc, generated),
// so the daemon serves the UI with nothing installed beside it and nothing
// fetched at run time. See web/README.md and docs/web.md.
#pragma once

#include <string_view>
#include <vector>

namespace lathe::web {

struct Asset {
  std::string_view path;          // "index.html", "assets/app-3F2AB7QX.js" (under /ui/)
  std::string_view content_type;  // "text/javascript; charset=utf-8", ...
  std::string_view body;          // the file
  std::string_view gzip;          // the file gzip-compressed (level 9)
  bool immutable;                 // the name carries a hash of the content: cache forever
};

// Every file, index.html first. Constant; safe from any thread.
const std::vector<Asset>& Assets();

// The file at `path` (relative to /ui/, no leading slash), or null.
const Asset* FindAsset(std::string_view path);

// Whether a client's Accept-Encoding takes gzip (a "gzip" coding whose q is not 0).
bool AcceptsGzip(std::string_view accept_encoding);

}  // namespace lathe::web
