#!/bin/bash
# Runs a SQL file over copies of prepared inputs with two binaries, in
# turn, and prints the seconds of each `run --until-caught-up`.
# usage: ab.sh SQL_FILE BINARY_A BINARY_B INPUT_DIR...
set -uo pipefail
sql=$1; a=$2; b=$3; shift 3
for input in "$@"; do
  for bin in "$a" "$b"; do
    rm -rf /tmp/ab-run; cp -r "$input" /tmp/ab-run; sync
    start=$(date +%s.%N)
    "$bin" --data-dir /tmp/ab-run run "$sql" --until-caught-up >/tmp/ab-run.out 2>&1
    rc=$?
    end=$(date +%s.%N)
    echo "$(basename "$sql") input=$input bin=$bin rc=$rc seconds=$(echo "$end - $start" | bc)"
  done
done
rm -rf /tmp/ab-run
