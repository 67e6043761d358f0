#!/usr/bin/env bash
# metrics.sh - rkv-server --metrics HOST:PORT, scraped and parsed as
# Prometheus' text exposition format (0.0.4) on tcp and shm: every line a
# HELP, a TYPE or a sample of a declared metric; the counters follow what
# clients did (keys put, clients, chunks);
# other paths and methods get 404 and 405; a connection that never sends
# its request, and more idle connections than the endpoint keeps, do not
# stop a scrape; a bad --metrics is one line and exit 1.
# TAP output.  Usage: metrics.sh BUILD_DIR
set -u
unset RKV_LOG_LEVEL
O=${1:-build}
BIN="$O/bin"
n=0; fails=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails+1)); fi; }
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 is not installed"; exit 0; }

tmp=$(mktemp -d)
srv=""
trap '[ -n "$srv" ] && kill -TERM $srv 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
export RKV_SHM_DIR=$tmp/shm
printf 'metrics full secret 0123456789ab' >"$tmp/full"
printf 'metrics read-only secret 012345' >"$tmp/ro"
chmod 600 "$tmp/full" "$tmp/ro"

# scrape URL: parse it strictly; print "name{labels} value" lines
cat >"$tmp/scrape.py" <<'PY'
import re, sys, urllib.request
url = sys.argv[1]
r = urllib.request.urlopen(url, timeout=10)
ctype = r.headers.get("Content-Type", "")
assert ctype.startswith("text/plain; version=0.0.4"), ctype
text = r.read().decode("utf-8")
assert text.endswith("\n"), "no final newline"
name_re = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
label_re = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
sample = re.compile(r"^(%s)(\{%s(?:,%s)*\})? (-?[0-9.eE+]+|NaN|[+-]Inf)$" % (name_re, label_re, label_re))
types, helps, seen = {}, {}, set()
for ln in text.split("\n")[:-1]:
    if ln.startswith("# HELP "):
        name, _, h = ln[7:].partition(" ")
        assert re.fullmatch(name_re, name) and h, ln
        assert name not in helps, "HELP twice: " + name
        helps[name] = h
    elif ln.startswith("# TYPE "):
        name, _, t = ln[7:].partition(" ")
        assert t in ("counter", "gauge", "untyped", "histogram", "summary"), ln
        assert name not in types and name not in seen, "TYPE late or twice: " + name
        types[name] = t
    elif ln.startswith("#"):
        continue
    else:
        m = sample.match(ln)
        assert m, "not a sample: " + repr(ln)
        name = m.group(1)
        assert name in types, "sample without TYPE: " + name
        if types[name] == "counter":
            assert name.endswith("_total"), "counter not _total: " + name
        float(m.group(3))
        seen.add(name)
        print(name + (m.group(2) or ""), m.group(3))
for name in types:
    assert name in seen, "TYPE without sample: " + name
PY
scrape() { python3 "$tmp/scrape.py" "$1" >"$tmp/m" 2>"$tmp/m.err"; }
val() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/m"; }

for P in tcp shm; do
  if [ "$P" = tcp ]; then L=tcp://127.0.0.1:0; else L="shm:///rkv-metrics-$$"; fi
  "$BIN/rkv-server" --listen "$L" --memory 16M --capacity 1000 --metrics 127.0.0.1:0 \
    --secret-file "$tmp/full" --read-only-secret-file "$tmp/ro" >"$tmp/out" 2>"$tmp/log" &
  srv=$!
  A=""; U=""
  for _ in $(seq 1 100); do
    A=$(sed -n 's/^rkv-server: listening on //p' "$tmp/out")
    U=$(sed -n 's/.*metrics at \(http:[^ ]*\).*/\1/p' "$tmp/log")
    [ -n "$A" ] && [ -n "$U" ] && break; sleep 0.1
  done
  [ -n "$U" ]; ok $? "$P: the server logs where its metrics are ($U)"
  R() { timeout 20 "$BIN/rkv" --servers "$A" "$@"; }
  for i in $(seq 1 25); do printf 'put m%s v%s\n' "$i" "$i"; done | R --secret-file "$tmp/full" --pipe >/dev/null
  R --secret-file "$tmp/full" put one 1
  R --secret-file "$tmp/ro" put two 2 2>/dev/null
  scrape "$U"; rc=$?
  [ "$rc" = 0 ]; ok $? "$P: /metrics parses as the Prometheus text format ($(head -c 200 "$tmp/m.err"))"
  [ "$(val rkv_keys)" = 26 ]; ok $? "$P: rkv_keys counts the 26 keys put ($(val rkv_keys))"
  [ "$(val rkv_clients_connected_total)" = 3 ]; ok $? "$P: rkv_clients_connected_total: 3 clients ($(val rkv_clients_connected_total))"
  # the read-only client refuses its put itself (the server granted it
  # read-only rkeys), so no request reached the server to deny
  [ "$(val rkv_denied_total)" = 0 ]; ok $? "$P: rkv_denied_total: 0, the read-only put never reached the server ($(val rkv_denied_total))"
  g=$(val 'rkv_chunk_requests_total{result="granted"}')
  [ "${g:-0}" -ge 2 ]; ok $? "$P: chunk grants by result ($g granted)"
  [ "$(val rkv_data_bytes)" = 16777216 ] && [ "$(val rkv_index_slots)" -gt 1000 ]
  ok $? "$P: the regions' sizes"
  grep -q '^rkv_server_info{name="[^"]*",address="'"$A"'",version="[0-9.]*"} 1$' "$tmp/m"
  ok $? "$P: rkv_server_info names the server"
  # other paths and methods
  c=$(curl -s -o /dev/null -w '%{http_code}' "${U%/metrics}/other" 2>/dev/null || python3 -c '
import sys, urllib.request, urllib.error
try: urllib.request.urlopen(sys.argv[1])
except urllib.error.HTTPError as e: print(e.code)' "${U%/metrics}/other")
  [ "$c" = 404 ]; ok $? "$P: another path: 404 ($c)"
  hp=${U#http://}; hp=${hp%/metrics}; host=${hp%:*}; port=${hp##*:}
  c=$(python3 - "$host" "$port" <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
print(s.recv(100).split(b" ")[1].decode())
PY
)
  [ "$c" = 405 ]; ok $? "$P: POST: 405 ($c)"
  # a request that never ends and 20 idle connections: scrapes go on
  python3 - "$host" "$port" "$U" "$tmp/scrape.py" <<'PY' >"$tmp/slow" 2>&1
import socket, subprocess, sys
host, port = sys.argv[1], int(sys.argv[2])
slow = socket.create_connection((host, port))
slow.sendall(b"GET /metr")
idle = [socket.create_connection((host, port)) for _ in range(20)]
r = subprocess.run([sys.executable, sys.argv[4], sys.argv[3]], capture_output=True, timeout=20)
print("scrape", r.returncode)
PY
  grep -q "^scrape 0$" "$tmp/slow"; ok $? "$P: a half-sent request and 20 idle connections do not stop a scrape ($(head -c 100 "$tmp/slow"))"
  scrape "$U"; s1=$(val rkv_metrics_scrapes_total)
  [ "${s1:-0}" -ge 3 ]; ok $? "$P: rkv_metrics_scrapes_total counts the scrapes ($s1)"
  kill -TERM $srv; wait $srv 2>/dev/null; srv=""
done

# a bad --metrics: one line, exit 1 (tcp)
"$BIN/rkv-server" --listen tcp://127.0.0.1:0 --memory 16M --metrics nonsense >"$tmp/out" 2>"$tmp/log"; rc=$?
[ "$rc" = 1 ] && [ "$(grep -c '' "$tmp/log")" = 1 ] && grep -q "^rkv-server: --metrics nonsense: 'nonsense' is not HOST:PORT" "$tmp/log"
ok $? "--metrics nonsense: one line, exit 1 ($(head -c 120 "$tmp/log"))"
echo "1..$n"
[ "$fails" = 0 ]
