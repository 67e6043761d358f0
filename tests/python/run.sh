#!/usr/bin/env bash
# run.sh - the rkv Python module's tests (pytest, the system's python3)
# against the build in BUILD_DIR.  Part of `make test`; skips with the
# reason when the module or pytest is not there (a sanitizer build, no
# python3-dev or python3-pytest).
#   tests/python/run.sh BUILD_DIR
set -u -o pipefail
O=${1:-build}
cd "$(dirname "$0")/../.." || exit 2
PY=${PYTHON:-/usr/bin/python3}
mod=$(ls "$O"/python/rkv*.so 2>/dev/null | head -1)
if [ -z "$mod" ]; then
  echo "1..0 # SKIP the Python module is not built in $O (sanitizer builds and builds without python3-dev have none)"
  exit 0
fi
if ! "$PY" -c 'import pytest' 2>/dev/null; then
  echo "1..0 # SKIP $PY has no pytest (python3-pytest)"
  exit 0
fi
export PYTHONPATH="$O/python${PYTHONPATH:+:$PYTHONPATH}"
export RKV_BIN_DIR="$O/bin"
unset RKV_SERVERS RKV_SECRET_FILE
# pytest -v's result lines as TAP for tests/lib/tap.sh; the rest
# (a failure's traceback) as it is
"$PY" -m pytest -v --tb=short -p no:cacheprovider tests/python 2>&1 |
  awk '
    / PASSED( |$)/  { n++; printf "ok %d - %s\n", n, $1; next }
    / SKIPPED/      { n++; printf "ok %d - %s # SKIP\n", n, $1; next }
    / (FAILED|ERROR)( |$)/ && $1 ~ /::/ { n++; printf "not ok %d - %s\n", n, $1; next }
    { print }
    END { printf "1..%d\n", n }'
exit "${PIPESTATUS[0]}"
