#!/usr/bin/env bash
# The browser tests drive Debian's Chromium, its headless shell where there is one (Playwright's
# own browser download does not work on the lab machines). Install them when missing and we
# may; otherwise say what to do.
set -euo pipefail
if [ -n "${CIFARLAB_CHROMIUM:-}" ]; then
  [ -x "$CIFARLAB_CHROMIUM" ] && exit 0
  echo "note: CIFARLAB_CHROMIUM=$CIFARLAB_CHROMIUM is not an executable." >&2
  exit 0
fi
if [ -x /usr/bin/chromium-headless-shell ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "Installing Chromium's headless shell for the browser tests (apt-get install chromium-headless-shell)..."
  apt-get update -qq >/dev/null
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null; then
    exit 0
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && exit 0
fi
[ -x /usr/bin/chromium ] && exit 0
echo "note: no Chromium here, and it cannot be installed (needs root and apt-get)." >&2
echo "      The browser tests will be skipped; install chromium-headless-shell, or set CIFARLAB_CHROMIUM." >&2
