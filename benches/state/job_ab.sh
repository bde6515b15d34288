#!/bin/bash
# Runs the built-in job (`job nexmark ARGS --until-caught-up`) with each binary on a fresh copy of INPUT
# and prints wall/user/system seconds, peak RSS and the state on disk.
# usage: job_ab.sh "JOB ARGS" INPUT BIN...
args=$1; input=$2; shift 2
for bin in "$@"; do
  rm -rf /tmp/abj-run; cp -r "$input" /tmp/abj-run; sync
  /usr/bin/time -f "%e %U %S %M" -o /tmp/abj-time "$bin" --data-dir /tmp/abj-run job nexmark $args --until-caught-up >/tmp/abj-out 2>&1
  rc=$?
  read wall user sys rss < /tmp/abj-time
  echo "$(basename $bin) input=$(basename $input) args='$args' rc=$rc wall=$wall user=$user sys=$sys rss_mib=$((rss/1024)) state_mib=$(du -sm /tmp/abj-run/state | cut -f1)"
done
rm -rf /tmp/abj-run
