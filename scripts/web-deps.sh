#!/usr/bin/env bash
# Installs web/node_modules exactly as web/package-lock.json says (npm ci),
# unless it already does: a hash of the lockfile is kept in
# node_modules/.lathe-lock, so a current tree costs one sha256sum.
# No install scripts run, and no browser is downloaded (the browser tests use
# Debian's chromium).
set -euo pipefail
cd "$(dirname "$0")/../web"
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f node_modules/.lathe-lock && "$(cat node_modules/.lathe-lock)" == "$want" ]]; then
  exit 0
fi
echo "web-deps: npm ci in web/" >&2
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
echo "$want" > node_modules/.lathe-lock
