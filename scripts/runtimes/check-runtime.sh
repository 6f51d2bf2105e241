#!/usr/bin/env bash
# Checks inboxkit on a supported Node that is not the project's own (Node 20 and 22; the project runs itself on
# Node 24, see the README's "How it works"), as a user on that Node meets it:
#   1. a clean install (`npm ci` of this commit in a scratch clone) prints no warning (but the engine warnings
#      listed with their reason in engine-exceptions.json);
#   2. build and typecheck, the packed-tarball check (scripts/check-packages.ts) and a user's own install of
#      @inboxkit/core with the kysely line given, run on that Node;
#   3. the test projects given (vitest --project), on the services this checkout runs (.services/env).
# In the scratch clone the link node_modules/.bin/node (the project's Node 24) is removed, so npm scripts and
# every process they start find this Node first on PATH.
#
#   bash scripts/runtimes/check-runtime.sh 22.23.5 --kysely 0.29 --projects "core testing http"
set -euo pipefail
version="${1:?usage: check-runtime.sh VERSION --kysely LINE --projects \"P1 P2 …\"}"
shift
kysely="" projects=""
while (($#)); do
  case "$1" in
  --kysely) kysely="$2"; shift 2 ;;
  --projects) projects="$2"; shift 2 ;;
  *) echo "check-runtime.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$(bash "$root/scripts/runtimes/node-runtime.sh" "$version")"
export PATH="$bin:$PATH"
[[ "$(node --version)" == "v$version" ]] || { echo "[runtime] node on PATH is $(node --version), not v$version" >&2; exit 1; }
say() { printf '[runtime %s %s] %s\n' "$version" "$(date +%H:%M:%S)" "$*"; }

scratch="$(mktemp -d "${TMPDIR:-/tmp}/inboxkit-node-$version-XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
git clone -q "$root" "$scratch/inboxkit"
cd "$scratch/inboxkit"

say "npm ci (npm $(npm --version) on node $(node --version))"
log="$scratch/npm-ci.log"
npm ci --no-audit --no-fund --loglevel=warn >"$log" 2>&1 || { cat "$log"; exit 1; }
# Any warning fails, except an engine warning listed with its reason in engine-exceptions.json.
node scripts/runtimes/check-install-log.mjs "$log" || { echo "[runtime] a clean install on Node $version printed warnings"; exit 1; }
rm -f node_modules/.bin/node # npm scripts now find Node $version first on PATH
[[ "$(npm exec -- node --version)" == "v$version" ]] || { echo "[runtime] npm scripts do not run on v$version" >&2; exit 1; }

quietly() { # runs a command, showing its output only when it fails
  local out="$scratch/step.log"
  "$@" >"$out" 2>&1 || { cat "$out"; echo "[runtime $version] failed: $*"; return 1; }
}
say "build"
quietly npm run -s build
say "typecheck"
quietly npm run -s typecheck
say "packed tarballs (check:packages)"
# Its step lines and problems are shown as they come (a hang shows where it stands); the whole log on failure.
npm run -s check:packages 2>&1 | tee "$scratch/packages.log" | grep --line-buffered -E '^\[check-packages|PROBLEM' ||
  { cat "$scratch/packages.log"; exit 1; }
if [[ -f "$root/.services/env" ]]; then
  set -a
  # shellcheck disable=SC1091
  . "$root/.services/env"
  set +a
fi
if [[ -n "$kysely" ]]; then
  say "a user's install: @inboxkit/core with kysely $kysely"
  node --import tsx scripts/check-user-install.ts --kysely "$kysely"
fi
if [[ -n "$projects" ]]; then
  args=()
  for project in $projects; do args+=(--project "$project"); done
  say "tests: $projects"
  npx vitest run "${args[@]}"
fi
say "done"
