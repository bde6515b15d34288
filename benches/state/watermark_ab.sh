#!/bin/bash
# Windows that close under a watermark against windows kept open, side by
# side in one run: the same Nexmark input (generated once), each view in its
# own copy of it, `run --until-caught-up`, alternating ROUNDS times. Prints
# one Markdown row per run (wall seconds, max RSS, state point reads, the
# state directory's size after the run, rows of the view) and the ratio of
# the medians, for docs/performance.md.
# WINDOW picks the pair: `tumble` (the per-auction 10 s TUMBLE,
# tumble_{open,closing}.sql) or `session` (Nexmark q11's 10 s sessions,
# session_{open,closing}.sql) or `join` (Nexmark q8, join_{open,closing}.sql).
# usage: watermark_ab.sh BINARY [EVENTS] [ROUNDS] [WINDOW]
set -euo pipefail
bin=$1; events=${2:-8000000}; rounds=${3:-3}; window=${4:-tumble}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/watermark-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin" --data-dir "$work/input" gen nexmark --events "$events" >/dev/null 2>&1
echo "| view | round | wall s | max RSS MB | state point reads | state dir MB | view rows |"
echo "|---|---:|---:|---:|---:|---:|---:|"
declare -A walls
for round in $(seq 1 "$rounds"); do
  for query in "${window}_open" "${window}_closing"; do
    rm -rf "$work/run"; cp -r "$work/input" "$work/run"; sync
    /usr/bin/time -f "%e %M" -o "$work/time" \
      "$bin" --data-dir "$work/run" run "$here/$query.sql" --until-caught-up >"$work/out" 2>&1
    read -r wall rss_kb <"$work/time"
    reads=$(sed -n 's/^state reads: \([0-9]*\) point reads.*/\1/p' "$work/out")
    rows=$("$bin" --data-dir "$work/run" view read windowed | wc -l)
    state_mb=$(du -sm "$work/run/state" | cut -f1)
    echo "| $query | $round | $wall | $((rss_kb / 1024)) | $reads | $state_mb | $rows |"
    walls[$query]="${walls[$query]:-} $wall"
  done
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
open=$(echo "${walls[${window}_open]}" | median); closing=$(echo "${walls[${window}_closing]}" | median)
echo
echo "median wall: open $open s, closing $closing s, closing/open $(echo "scale=2; $closing / $open" | bc)"
