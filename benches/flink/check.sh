#!/bin/bash
# Checks the Flink translations against Millpond: runs each query in both over
# the same events and compares the views' final rows (compare.py). Slow
# (Flink collects every change through its collect sink): use a small input.
#
# usage: check.sh MILLPOND_BINARY DATA_DIR QUERY...
#   QUERY  stems of queries/*.sql; qN runs sql/nexmark/qN.sql in Millpond,
#          others benches/state/QUERY.sql
# Environment: FLINK_INPUT, JAVA, JAVA_HEAP, MVN_ARGS as for run.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ $# -lt 3 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
fi
bin=$(realpath "$1"); data=$(realpath "$2"); shift 2
input=${FLINK_INPUT:-/tmp/flink-input/$(basename "$data")}
work=/tmp/flink-nexmark-check
# shellcheck source=common.sh
. "$here/common.sh"
dump_input "$bin" "$data" "$input"
build_jar "$here"
status=0
for q in "$@"; do
  case $q in
    q*) mp_sql=$repo/sql/nexmark/$q.sql ;;
    *) mp_sql=$repo/benches/state/$q.sql ;;
  esac
  rm -rf "$work"; mkdir -p "$work/millpond-views"
  cp -r "$data" "$work/data"
  "$bin" --data-dir "$work/data" run "$mp_sql" --until-caught-up >"$work/millpond.log" 2>&1 ||
    { echo "$q: millpond run failed:"; tail "$work/millpond.log"; exit 1; }
  for view in $(sed -n 's/^CREATE MATERIALIZED VIEW \([A-Za-z0-9_]*\).*/\1/p' "$mp_sql"); do
    "$bin" --data-dir "$work/data" view read "$view" >"$work/millpond-views/$view.jsonl"
  done
  rm -rf /tmp/flink-nexmark
  flink_java "$here" "$here/queries/$q.sql" "$input" 1 --materialize "$work/flink.jsonl" >"$work/flink.log" 2>&1 ||
    { echo "$q: flink run failed:"; tail -30 "$work/flink.log"; exit 1; }
  echo "== $q"
  python3 "$here/compare.py" "$work/millpond-views" "$work/flink.jsonl" || status=1
done
rm -rf "$work" /tmp/flink-nexmark "${FLINK_TMP:-/tmp/flink-nexmark-tmp}"
exit $status
