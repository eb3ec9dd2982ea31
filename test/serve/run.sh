#!/usr/bin/env bash
# Runs kt-serve's node tests (ctest entries serve_*, test/serve/CMakeLists.txt):
#
#   run.sh npm-ci
#       installs node_modules from package-lock.json (npm ci, no install
#       scripts); nothing to do when the lockfile has not changed since.
#   run.sh test FILE.test.mjs KT_SERVE PLAN [kt-serve options...]
#       starts KT_SERVE PLAN --port 0 on loopback (it prints the port it got),
#       waits for /health, runs `node --test FILE` with KT_SERVE_URL,
#       KT_SERVE_ARGS (the options) and KT_SERVE_PID in the environment, then stops the server
#       with SIGTERM and fails if it had crashed or does not stop cleanly.
#       The server's log and the tests' files (screenshot, load.json) go to
#       $KT_SERVE_OUT (default: a temporary folder).
#
# Exit status 77 (ctest's SKIP_RETURN_CODE) when node 18+, npm or, for the
# browser test, Chromium are missing.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "run.sh: SKIP: $*"; exit 77; }
fail() { echo "run.sh: FAIL: $*" >&2; exit 1; }

need_node() {
  command -v node >/dev/null 2>&1 || skip "node is not installed (apt install nodejs npm)"
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 18 ] || skip "node $major is too old: the tests need 18 or later"
}

find_chromium() {
  local c
  for c in "${KT_CHROMIUM:-}" chromium chromium-browser google-chrome; do
    [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && { command -v "$c"; return 0; }
  done
  return 1
}

cmd=${1:-}
case "$cmd" in
  npm-ci)
    need_node
    command -v npm >/dev/null 2>&1 || skip "npm is not installed (apt install npm)"
    cd "$here"
    stamp=node_modules/.kt-package-lock.sha256
    sum=$(sha256sum package-lock.json | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
      echo "run.sh: node_modules is up to date with package-lock.json"
      exit 0
    fi
    npm ci --ignore-scripts --no-audit --no-fund || fail "npm ci failed (the npm registry must be reachable)"
    echo "$sum" > "$stamp"
    ;;
  test)
    [ $# -ge 4 ] || fail "usage: run.sh test FILE.test.mjs KT_SERVE PLAN [kt-serve options...]"
    file=$2 serve=$3 plan=$4
    shift 4
    need_node
    if [ ! -d "$here/node_modules" ]; then
      command -v npm >/dev/null 2>&1 || skip "npm is not installed (apt install npm)"
      fail "no $here/node_modules: run 'run.sh npm-ci' first (ctest's serve_npm_ci does)"
    fi
    if [ "$file" = browser.test.mjs ]; then
      chromium=$(find_chromium) || skip "Chromium is not installed (apt install chromium)"
      export KT_CHROMIUM=$chromium
    fi
    out=${KT_SERVE_OUT:-$(mktemp -d)}
    mkdir -p "$out"
    export KT_SERVE_OUT=$out
    name=${file%.test.mjs}
    # Per run (the pid): the serve_tools_* entries share a test file and run
    # side by side under ctest -j; with one log each read the other's URL and
    # lost its server when the other stopped (CI: "premature close").
    log=$out/$name.$$.server.log
    "$serve" "$plan" --host 127.0.0.1 --port 0 "$@" >"$log.stdout" 2>"$log" &
    pid=$!
    stop_server() {
      kill -TERM "$pid" 2>/dev/null || return 0
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; echo "run.sh: kt-serve did not stop on SIGTERM" >&2; }
    }
    trap stop_server EXIT

    url=""
    for _ in $(seq 1 300); do
      url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log.stdout" 2>/dev/null | head -1)
      [ -n "$url" ] && break
      kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "kt-serve exited before listening"; }
      sleep 0.1
    done
    [ -n "$url" ] || fail "kt-serve did not start listening in 30 s"
    node -e '
      const url = process.argv[1] + "/health";
      (async () => {
        for (let i = 0; i < 100; ++i) {
          try { if ((await fetch(url)).ok) process.exit(0); } catch {}
          await new Promise((r) => setTimeout(r, 100));
        }
        process.exit(1);
      })();' "$url" || fail "$url/health did not answer"
    echo "run.sh: kt-serve at $url ($*)"

    KT_SERVE_URL=$url KT_SERVE_ARGS="$*" KT_SERVE_PID=$pid node --test --test-reporter=spec "$here/$file"
    rc=$?
    kill -0 "$pid" 2>/dev/null || { echo "run.sh: kt-serve died during the tests; its log:" >&2; tail -50 "$log" >&2; exit 1; }
    trap - EXIT
    stop_server
    wait "$pid"
    server_rc=$?
    [ "$server_rc" -eq 0 ] || { tail -50 "$log" >&2; fail "kt-serve exited with status $server_rc on SIGTERM"; }
    exit $rc
    ;;
  *)
    fail "usage: run.sh npm-ci | run.sh test FILE.test.mjs KT_SERVE PLAN [kt-serve options...]"
    ;;
esac
