# SPDX-License-Identifier: MIT
# peers.sh - sourced by bench/run-ycsb.sh, run-idle.sh, run-mem.sh,
# run-fill.sh, run-big.sh, run-migrate.sh, run-failover.sh, run-goals.sh and
# bench/ycsb/selftest.sh: start a peer store (redis-server, memcached) on a
# free loopback port, or an rkv-server.
# The caller owns a PIDS array (the started PIDs are appended to it).

# bench_setup TOOL BINARY...: the start of a benchmark script: every
# BINARY executable (else one line, exit 2), $RES made, a fresh $tmp and
# an empty PIDS, both cleaned up on exit (the PIDs killed).
bench_setup() {
  local tool=$1 b
  shift
  for b in "$@"; do
    if [ ! -x "$b" ]; then
      echo "$tool: $b not found (run make first)" >&2
      exit 2
    fi
  done
  mkdir -p "$RES" || exit 2
  tmp=$(mktemp -d) || exit 2
  PIDS=()
  trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
}

# A port nothing listens on (checked by connecting to it), below the
# ephemeral range, so that no outgoing connection takes it between this
# probe and the server's bind.
free_port() {
  local p i lo_span=12768 lo
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null &&
    [ "$lo" -gt 21024 ] && lo_span=$((lo - 20000))
  for i in $(seq 1 200); do
    p=$((20000 + RANDOM % lo_span))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# wait_port PORT PID: 0 once PORT accepts, 1 if PID died or 20 s passed.
wait_port() {
  local i
  for i in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# start_peer LOG CMD...: runs CMD (its @PORT@ replaced by a free port) in
# the background, output in LOG, until it listens.  A port taken between
# the probe and the bind, or a start slower than 20 s, costs another try on
# a new port (3 in all).  Sets PORT; when every try failed, returns 1 with
# one line per try in PEER_WHY.  Run it in this shell, not in $(...), so
# its PIDs stay in PIDS.
start_peer() {
  local log=$1 try pid a
  shift
  PEER_WHY=
  for try in 1 2 3; do
    PORT=$(free_port) || break
    local argv=()
    for a in "$@"; do argv+=("${a//@PORT@/$PORT}"); done
    "${argv[@]}" >"$log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_port "$PORT" "$pid" && return 0
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    PEER_WHY+="try $try on port $PORT: $(tail -2 "$log" | tr '\n' ' ')"$'\n'
  done
  return 1
}

# start_etcd DIR: a one-member etcd (Debian's) on free loopback ports, its
# data and log in DIR; PORT is its client port.  1 (PEER_WHY) if it did not
# start.  (run-migrate.sh, run-failover.sh)
start_etcd() {
  local pport
  pport=$(free_port) || return 1
  start_peer "$1/etcd.log" etcd --name rkv-bench --data-dir "$1/etcd" \
    --listen-client-urls http://127.0.0.1:@PORT@ \
    --advertise-client-urls http://127.0.0.1:@PORT@ \
    --listen-peer-urls "http://127.0.0.1:$pport" \
    --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "rkv-bench=http://127.0.0.1:$pport"
}

# start_rkv_server OUT ARGS...: runs $SRV (an rkv-server) with ARGS in the
# background, stdout in OUT and stderr in OUT.err, until it says where it
# listens.  Sets RPID (appended to PIDS) and RADDR, its bound address;
# when it died or said nothing for 10 s, returns 1 with its last error
# line in RKV_WHY.  Run it in this shell, not in $(...).
start_rkv_server() {
  local out=$1
  shift
  "$SRV" "$@" >"$out" 2>"$out.err" &
  RPID=$!
  PIDS+=("$RPID")
  for _ in $(seq 1 100); do
    RADDR=$(sed -n 's/^rkv-server: listening on //p' "$out")
    [ -n "$RADDR" ] && return 0
    kill -0 "$RPID" 2>/dev/null || break
    sleep 0.1
  done
  RKV_WHY=$(tail -1 "$out.err")
  return 1
}

# peers_stop: stop every PID in PIDS (TERM, then wait), empty it.
peers_stop() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  PIDS=()
}

# cpu_of PID [COMM]: ns on a CPU so far of PID's threads (only those named
# COMM, when given), from /proc/PID/task/*/schedstat.
cpu_of() {
  local t s=0 c
  for t in /proc/"$1"/task/*; do
    if [ -n "${2:-}" ]; then
      read -r c <"$t/comm" 2>/dev/null || continue
      [ "$c" = "$2" ] || continue
    fi
    read -r c _ <"$t/schedstat" 2>/dev/null && s=$((s + c))
  done
  echo "$s"
}

# idle_pct PID SECS: per cent of one core PID used over SECS, after a
# second of rest.
idle_pct() {
  local a b
  sleep 1
  a=$(cpu_of "$1")
  sleep "$2"
  b=$(cpu_of "$1")
  awk -v a="$a" -v b="$b" -v s="$2" 'BEGIN {printf "%.3f", (b - a) / 1e7 / s}'
}
