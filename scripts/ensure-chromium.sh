#!/usr/bin/env bash
# The browser tests drive Debian's Chromium (Playwright's own browser download does not work on
# the lab machines). Install it when it is missing and we may; otherwise say what to do.
set -euo pipefail
CHROMIUM=${CIFARLAB_CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "Installing Chromium for the browser tests (apt-get install chromium)..."
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "note: $CHROMIUM not found and cannot install it here (needs root and apt-get)." >&2
echo "      The browser tests will be skipped; install Chromium, or set CIFARLAB_CHROMIUM." >&2
