#!/usr/bin/env bash
# Operational checks under wrk load (run by hand or by `make chaos`):
#   1. reload the configuration CHAOS_RELOADS times (SIGHUP) while wrk runs:
#      wrk must see 0 socket errors and 0 non-2xx answers;
#   2. kill one of two upstream instances while wrk runs GETs: only requests
#      in flight to it may fail (GETs are retried on the other instance);
#   3. a hanging upstream answers 504 within the read timeout.
# Everything listens on 127.0.0.1; every process is stopped on exit.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PROG=chaos.sh
cd "$(dirname "$0")/.."

RELOADS=${CHAOS_RELOADS:-10}
DURATION=${CHAOS_DURATION:-10}
TRANSPORTS=${CHAOS_TRANSPORTS:-"reactor fasthttp"}
GW=127.0.0.1:18080 ADMIN=127.0.0.1:19901 UP1=127.0.0.1:19101 UP2=127.0.0.1:19102 HANG=127.0.0.1:19103

# shellcheck disable=SC2046 # one word per missing command
apt_install $(missing wrk)
build tollgate bench-upstream
make_tmp chaos

write_config() { # $1 = priority, so every reload is a real change
cat >"$TMP/gw.yaml" <<YAML
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
cat >"$TMP/hang.py" <<'PY'
import socket, sys, threading
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, int(port))); s.listen(64)
def hold(c):
    while c.recv(65536): pass
while True:
    c, _ = s.accept(); threading.Thread(target=hold, args=(c,), daemon=True).start()
PY
start hang python3 "$TMP/hang.py" "$HANG"

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
  start up1 bin/bench-upstream -listen "$UP1"; start up2 bin/bench-upstream -listen "$UP2"
  write_config 1
  start "gw-$t" env TOLLGATE_TRANSPORT="$t" bin/tollgate run -c "$TMP/gw.yaml"; gw=${PIDS[gw-$t]}
  wait_port "gw-$t" "$GW"; wait_port up1 "$UP1"; wait_port up2 "$UP2"; wait_port hang "$HANG"

  # 1. reloads under load
  wrk -t2 -c64 -d"${DURATION}s" "http://$GW/r" >"$TMP/wrk-reload" &
  w=$!
  sleep 1
  for i in $(seq "$RELOADS"); do write_config $((i + 1)); kill -HUP "$gw"; sleep $(awk "BEGIN {print ($DURATION - 2) / $RELOADS}"); done
  wait $w
  read -r req err non <<<"$(parse_wrk "$TMP/wrk-reload")"
  reloaded=$(grep -c '"configuration reloaded"' "$TMP/gw-$t.log" || true)
  version=$(curl -s "http://$ADMIN/admin/config" | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
  row "| $t | $RELOADS reloads under wrk | $req requests, $err socket errors, $non non-2xx; $reloaded reloads applied, config version $version |"
  { [ "$err" = 0 ] && [ "$non" = 0 ] && [ "$reloaded" = "$RELOADS" ]; } || fail=1

  # 2. kill one instance under load; p99 before it, and after its ejection
  wrk -t2 -c64 -d"$((DURATION / 2))s" --latency "http://$GW/k" >"$TMP/wrk-before"
  wrk -t2 -c64 -d"${DURATION}s" "http://$GW/k" >"$TMP/wrk-kill" &
  w=$!
  sleep $((DURATION / 2))
  kill -9 "${PIDS[up1]}"; wait "${PIDS[up1]}" 2>/dev/null || true # reaped quietly
  wait $w
  wrk -t2 -c64 -d"$((DURATION / 2))s" --latency "http://$GW/k" >"$TMP/wrk-after"
  read -r req err non <<<"$(parse_wrk "$TMP/wrk-kill")"
  read -r _ err2 non2 <<<"$(parse_wrk "$TMP/wrk-after")"
  p99() { awk '$1 == "99%" {print $2}' "$1"; }
  row "| $t | kill 1 of 2 instances under wrk | $req requests, $err socket errors, $non non-2xx; p99 $(p99 "$TMP/wrk-before") before, $(p99 "$TMP/wrk-after") after the ejection ($non2 non-2xx then) |"
  [ "$err2" = 0 ] && [ "$non2" = 0 ] || fail=1
  { [ "$err" = 0 ] && [ "$non" -le 64 ]; } || fail=1

  # 3. hanging upstream
  out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "http://$GW/hang")
  row "| $t | hanging upstream (read timeout 400ms) | status ${out% *} after ${out#* }s |"
  [ "${out% *}" = 504 ] || fail=1

  stop "gw-$t"; stop up1; stop up2
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
