#!/usr/bin/env bash
# Debian's Chromium for the console's browser tests (packages/cli/test/console): playwright-core drives it and
# downloads no browser of its own. Idempotent: does nothing when /usr/bin/chromium is there; installs the
# `chromium` package as root; otherwise says what to run. Called by .ci/run before the tests.
set -euo pipefail

CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [[ -x "$CHROMIUM" ]]; then
  echo "[browser] $("$CHROMIUM" --version 2>/dev/null | head -1 || echo "$CHROMIUM")"
  exit 0
fi
if [[ $EUID -ne 0 ]]; then
  echo "[browser] no Chromium at $CHROMIUM: install Debian's package (sudo apt-get install -y chromium) or set CHROMIUM_PATH" >&2
  exit 1
fi
command -v apt-get >/dev/null || {
  echo "[browser] no Chromium at $CHROMIUM and no apt-get to install it" >&2
  exit 1
}
t0=$(date +%s)
echo "[browser] apt-get install chromium"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends chromium >/dev/null
echo "[browser] $("$CHROMIUM" --version 2>/dev/null | head -1) installed in $(($(date +%s) - t0))s"
