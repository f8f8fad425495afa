#!/usr/bin/env bash
# Renders an HTML report to a PNG with headless Chromium, to look at the page (the charts above all)
# without a browser at hand. Installs the Debian package `chromium` when it is missing.
#
#   ci/render_report.sh tests/golden/sample.html /tmp/sample.png
#   ci/render_report.sh build/report.html /tmp/report.png 1400x3000   # window size, default 1400x2000
#
# The screenshot is the window, not the whole page: give a taller window for a longer report.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
html="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
out="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
size="${3:-1400x2000}"
[ -f "$html" ] || { echo "no such file: $html" >&2; exit 2; }

if ! command -v chromium >/dev/null; then
  sudo=(); [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium >/dev/null
fi

# Chromium prints harmless D-Bus and GPU complaints on stderr; keep them unless it fails.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot="$out" \
    --window-size="${size/x/,}" "file://$html" >"$log" 2>&1 || [ ! -s "$out" ]; then
  cat "$log" >&2
  echo "chromium did not write $out" >&2
  exit 1
fi
echo "$out"
