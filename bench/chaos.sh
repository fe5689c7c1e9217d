#!/usr/bin/env bash
# Operational checks under wrk load (run by hand or by `make chaos`):
#   1. reload the configuration CHAOS_RELOADS times (SIGHUP) while wrk runs:
#      wrk must see 0 socket errors and 0 non-2xx answers;
#   2. kill one of two upstream instances while wrk runs GETs: only requests
#      in flight to it may fail (GETs are retried on the other instance);
#   3. a hanging upstream answers 504 within the read timeout.
# Everything listens on 127.0.0.1; every process is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

RELOADS=${CHAOS_RELOADS:-10}
DURATION=${CHAOS_DURATION:-10}
TRANSPORTS=${CHAOS_TRANSPORTS:-"netpoll fasthttp"}
GW=127.0.0.1:18080 ADMIN=127.0.0.1:19901 UP1=127.0.0.1:19101 UP2=127.0.0.1:19102 HANG=127.0.0.1:19103

command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
go build -o bin/tollgate ./cmd/tollgate
go build -o bin/bench-upstream ./bench/cmd/upstream

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing on $1" >&2; return 1; }

start_upstream() { bin/bench-upstream -listen "$1" >/dev/null 2>&1 & pids+=($!); echo $!; }

write_config() { # $1 = priority, so every reload is a real change
cat >"$tmp/gw.yaml" <<YAML
listen: "$GW"
watch: false   # reloads here are the script's SIGHUPs, counted one by one
admin: {listen: "$ADMIN"}
access_log: {path: "off"}
services:
  api:
    instances: [{addr: "$UP1"}, {addr: "$UP2"}]
    timeouts: {connect: 500ms, read: 1s, total: 3s}
  hang:
    instances: [{addr: "$HANG"}]
    timeouts: {connect: 500ms, read: 400ms, total: 2s}
routes:
  - {name: api, priority: $1, match: {prefix: /}, service: api}
  - {name: hang, priority: 1000, match: {prefix: /hang}, service: hang}
YAML
}

# A listener that accepts and reads but never answers.
python3 - "$HANG" <<'PY' & pids+=($!)
import socket, sys, threading
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, int(port))); s.listen(64)
def hold(c):
    while c.recv(65536): pass
while True:
    c, _ = s.accept(); threading.Thread(target=hold, args=(c,), daemon=True).start()
PY

parse_wrk() { # prints "requests errors non2xx"
  local f=$1 req err non
  req=$(awk '/requests in/ {print $1}' "$f")
  err=$(awk '/Socket errors/ {gsub(",","");  print $4+$6+$8+$10}' "$f"); err=${err:-0}
  non=$(awk '/Non-2xx/ {print $NF}' "$f"); non=${non:-0}
  echo "$req $err $non"
}

fail=0
results=()
row() { echo "$1"; results+=("$1"); }
for t in $TRANSPORTS; do
  up1=$(start_upstream "$UP1"); start_upstream "$UP2" >/dev/null
  write_config 1
  TOLLGATE_TRANSPORT=$t bin/tollgate run -c "$tmp/gw.yaml" >/dev/null 2>"$tmp/gw-$t.log" & gw=$!; pids+=($gw)
  wait_port "$GW"; wait_port "$UP1"; wait_port "$UP2"; wait_port "$HANG"

  # 1. reloads under load
  wrk -t2 -c64 -d"${DURATION}s" "http://$GW/r" >"$tmp/wrk-reload" &
  w=$!
  sleep 1
  for i in $(seq "$RELOADS"); do write_config $((i + 1)); kill -HUP "$gw"; sleep $(awk "BEGIN {print ($DURATION - 2) / $RELOADS}"); done
  wait $w
  read -r req err non <<<"$(parse_wrk "$tmp/wrk-reload")"
  reloaded=$(grep -c '"configuration reloaded"' "$tmp/gw-$t.log" || true)
  version=$(curl -s "http://$ADMIN/admin/config" | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
  row "| $t | $RELOADS reloads under wrk | $req requests, $err socket errors, $non non-2xx; $reloaded reloads applied, config version $version |"
  { [ "$err" = 0 ] && [ "$non" = 0 ] && [ "$reloaded" = "$RELOADS" ]; } || fail=1

  # 2. kill one instance under load
  wrk -t2 -c64 -d"${DURATION}s" "http://$GW/k" >"$tmp/wrk-kill" &
  w=$!
  sleep $((DURATION / 2))
  kill -9 "$up1"
  wait $w
  read -r req err non <<<"$(parse_wrk "$tmp/wrk-kill")"
  row "| $t | kill 1 of 2 instances under wrk | $req requests, $err socket errors, $non non-2xx |"
  { [ "$err" = 0 ] && [ "$non" -le 64 ]; } || fail=1

  # 3. hanging upstream
  out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "http://$GW/hang")
  row "| $t | hanging upstream (read timeout 400ms) | status ${out% *} after ${out#* }s |"
  [ "${out% *}" = 504 ] || fail=1

  kill "$gw"; wait "$gw" 2>/dev/null || true
  pkill -f "bench-upstream -listen $UP2" || true
  sleep 0.3
done
if [ "${CHAOS_RECORD:-0}" = 1 ]; then
  {
    echo
    echo "## Operational checks, $(date -u)"
    echo
    echo "- command: \`CHAOS_RECORD=1 bash bench/chaos.sh\` (wrk -t2 -c64 -d${DURATION}s; $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
    echo "- verdict: $([ $fail = 0 ] && echo pass || echo FAIL)"
    echo
    echo "| transport | check | outcome |"
    echo "|---|---|---|"
    printf '%s\n' "${results[@]}"
  } >>bench/RESULTS.md
  echo "chaos: appended to bench/RESULTS.md"
fi
exit $fail
