#!/usr/bin/env bash
# Signed-request load with replay protection. See bench/README.md.
#
# Starts redis-server (127.0.0.1:16379, no persistence), the bench upstream
# (127.0.0.1:19100) and two gateway nodes sharing that Redis (A on
# 127.0.0.1:18080, B on 127.0.0.1:18081), then runs bench/cmd/signload
# against node A: signed requests with fresh nonces at SIGNLOAD_RATE for
# SIGNLOAD_DURATION, node A's RSS sampled once a second, and afterwards a
# sample of the accepted requests replayed to node B, each of which must be
# refused as a replay. Exits non-zero when a replay was not refused.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
PROG=signload.sh
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---------------------------------------------------------------- knobs
RATE=${SIGNLOAD_RATE:-50000}
DURATION=${SIGNLOAD_DURATION:-60s}
WARMUP=${SIGNLOAD_WARMUP:-5s}
CONNS=${SIGNLOAD_CONNS:-64}
SAMPLE=${SIGNLOAD_SAMPLE:-0.01}
RECORD=${SIGNLOAD_RECORD:-0}
KEEP_TMP=${SIGNLOAD_KEEP:-0}
NPROC=$(nproc)

REDIS_ADDR=127.0.0.1:16379
UPSTREAM_ADDR=127.0.0.1:19100
NODE_A=127.0.0.1:18080
NODE_B=127.0.0.1:18081
REQ_PATH=/api/x
QUERY='channel=app&page=2'
APP_KEY=bench-app

# The exact command, for the record (every SIGNLOAD_*/TOLLGATE_* variable set).
COMMAND=$(command_line 'SIGNLOAD|TOLLGATE' 'TOKEN|SECRET|PASSWORD' bench/signload.sh)

[[ $RATE =~ ^[0-9]+([.][0-9]+)?$ ]] || die "SIGNLOAD_RATE must be a number"
[[ $CONNS =~ ^[1-9][0-9]*$ ]] || die "SIGNLOAD_CONNS must be a positive integer"
NONCE_RATE=$(awk -v r="$RATE" 'BEGIN { printf "%d", (r < 1 ? 1 : r + 0.5) }')

# ---------------------------------------------------------------- prerequisites
# shellcheck disable=SC2046 # one word per missing command
apt_install $(missing redis-server)

# ---------------------------------------------------------------- build
log "building bin/tollgate, bin/bench-upstream and bin/bench-signload"
build tollgate bench-upstream bench-signload

# ---------------------------------------------------------------- processes
make_tmp signload

for addr in $REDIS_ADDR $UPSTREAM_ADDR $NODE_A $NODE_B; do
	port_busy "$addr" && die "$addr is already in use; stop whatever listens there"
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

mkdir -p "$TMP/redis"
start redis redis-server --port "${REDIS_ADDR##*:}" --bind 127.0.0.1 --save "" --appendonly no \
	--protected-mode no --daemonize no --dir "$TMP/redis"
wait_port redis $REDIS_ADDR

start upstream bin/bench-upstream -listen $UPSTREAM_ADDR
wait_port upstream $UPSTREAM_ADDR

SECRET=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n') # 48 hex digits
write_config() { # listen file
	cat >"$2" <<-EOF
		listen: "$1"
		workers: 0
		watch: false
		admin: {listen: "off"}
		access_log: {path: "off"}
		consumers:
		  - {app_key: $APP_KEY, secret: "$SECRET", tier: enterprise}
		signature: {nonce_rate: $NONCE_RATE}
		services:
		  up:
		    instances: [{addr: "$UPSTREAM_ADDR"}]
		routes:
		  - {name: signed, match: {prefix: /}, auth: signature, service: up}
	EOF
	chmod 600 "$2"
}
for node in a b; do
	if [[ $node == a ]]; then addr=$NODE_A; else addr=$NODE_B; fi
	write_config "$addr" "$TMP/node-$node.yaml"
	# Only the generated config and TOLLGATE_REDIS decide how the node runs.
	start "node-$node" env -u TOLLGATE_LISTEN -u TOLLGATE_CONFIG -u TOLLGATE_ACCESS_LOG -u TOLLGATE_NODES \
		TOLLGATE_REDIS=$REDIS_ADDR bin/tollgate run -c "$TMP/node-$node.yaml"
done
wait_port node-a $NODE_A
wait_port node-b $NODE_B

# ---------------------------------------------------------------- run
log "nproc=$NPROC rate=$RATE/s duration=$DURATION warm-up=$WARMUP conns=$CONNS nonce_rate=$NONCE_RATE"
log "node A pid ${PIDS[node-a]} on $NODE_A, node B pid ${PIDS[node-b]} on $NODE_B, redis on $REDIS_ADDR"
rc=0
SIGNLOAD_SECRET=$SECRET bin/bench-signload -url "http://$NODE_A$REQ_PATH" -replay-url "http://$NODE_B$REQ_PATH" \
	-app-key $APP_KEY -query "$QUERY" -rate "$RATE" -duration "$DURATION" -warmup "$WARMUP" \
	-conns "$CONNS" -pid "${PIDS[node-a]}" -replay-sample "$SAMPLE" | tee "$TMP/signload.out" || rc=$?
SUMMARY=$(grep '^SIGNLOAD ' "$TMP/signload.out" || true)
[[ -n $SUMMARY ]] || die "no SIGNLOAD line from the generator (exit $rc)"

val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$SUMMARY"; }

rss_b=$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/${PIDS[node-b]}/status" 2>/dev/null || echo n/a)
redis_mem=$(redis-cli -h "${REDIS_ADDR%:*}" -p "${REDIS_ADDR##*:}" INFO memory | tr -d '\r' | sed -n 's/^used_memory_human://p')
redis_keys=$(redis-cli -h "${REDIS_ADDR%:*}" -p "${REDIS_ADDR##*:}" DBSIZE | tr -d '\r')
# The cluster client logs each switch into degraded mode (Redis slower than
# its budget: the node then decides alone) and each recovery.
# While degraded a node claims nonces in its own filter only, so Redis never
# hears of them and another node would take them as fresh.
degraded() { # node: "N times, S s in total"
	local f=$TMP/node-$1.log n s
	n=$(grep -c 'redis degraded' "$f" || true)
	s=$(sed -n 's/.*"msg":"redis recovered".*"degraded_for":\([0-9.e+-]*\).*/\1/p' "$f" | awk '{ s += $1 } END { printf "%.2f", s }')
	echo "$n times, ${s} s in total"
}
degraded_a=$(degraded a)
degraded_b=$(degraded b)
echo "redis: used_memory_human=$redis_mem keys=$redis_keys"
echo "gateway: node B RSS ${rss_b} MiB after the replays; degraded Redis mode (Redis slower than the 20 ms budget): node A $degraded_a, node B $degraded_b"

achieved=$(val achieved_rps)
rate_line="achieved $achieved signed req/s of $RATE asked"
if awk -v a="$achieved" -v r="$RATE" 'BEGIN { exit !(a < 0.98 * r) }'; then
	rate_line="**achieved $achieved req/s, below the $RATE req/s asked** (the most this run reached)"
fi
verdict=pass
((rc == 0)) || verdict="FAIL (signload exit $rc)"

if [[ $RECORD == 1 ]]; then
	results=bench/RESULTS.md
	[[ -s $results ]] || printf '# Benchmark results\n' >"$results"
	{
		echo
		echo "## Signed-request load with replay protection, $(date -u)"
		echo
		echo "- command: \`$COMMAND\`"
		echo "- host: nproc $NPROC; $(go version | cut -d' ' -f3-); redis $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'); commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
		echo "- setup: two gateway nodes sharing one Redis, generator, upstream and Redis on the same $NPROC cores; load on node A, replays to node B; signature.nonce_rate $NONCE_RATE; $CONNS connections; warm-up $WARMUP, then $DURATION measured"
		echo "- rate: $rate_line"
		echo "- statuses: $(val ok) 2xx, $(val s401) 401 (of which $(val s401_replayed) \"replayed nonce\" on fresh nonces), $(val other) other, $(val errors) errors; $(val sent) sent, $(val unsent) unsent; $(val late_10ms) sent more than 10 ms late"
		echo "- node A RSS: $(val rss_warm_mib) MiB at the end of warm-up; after it min $(val rss_min_mib) / max $(val rss_max_mib) / end $(val rss_end_mib) MiB; growth $(val rss_growth_mib) MiB ($(val rss_growth_pct) %), of which $(val rss_growth_2nd_half_mib) MiB in the second half of the measured time"
		echo "- replays to node B: $(val replays_refused) of $(val replays_total) refused as \"replayed nonce\"; $(val replays_accepted) accepted, $(val replays_other) other, $(val replays_errors) errors"
		echo "- Redis after the run: used_memory $redis_mem, $redis_keys keys; nodes in degraded Redis mode: node A $degraded_a, node B $degraded_b"
		echo "- verdict: $verdict"
		echo
		echo '```'
		echo "$SUMMARY"
		echo '```'
	} >>"$results"
	log "appended to $results"
fi
exit "$rc"
