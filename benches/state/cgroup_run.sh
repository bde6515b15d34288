#!/bin/bash
# Needs root and the cgroup v1 memory controller at /sys/fs/cgroup/memory (docs/performance.md, stop 47).
# usage: cgroup_run.sh LIMIT_MIB(0 = none) CACHE_MIB INPUT SQL BIN
# Runs `BIN run SQL --until-caught-up --state-cache-mib CACHE` on a fresh copy of INPUT,
# with the page cache dropped first, in a memory cgroup (v1) capped at LIMIT (RSS + page cache).
limit=$1; cache=$2; input=$3; sql=$4; bin=$5
rm -rf /tmp/cg-run; cp -r "$input" /tmp/cg-run; sync; echo 3 > /proc/sys/vm/drop_caches
cg=/sys/fs/cgroup/memory/mp-bench
rmdir $cg 2>/dev/null; mkdir -p $cg
if [ "$limit" -gt 0 ]; then echo $((limit << 20)) > $cg/memory.limit_in_bytes; fi
start=$(date +%s.%N)
sh -c "echo \$\$ > $cg/cgroup.procs; exec /usr/bin/time -f '%e %U %S %M %F' -o /tmp/cg-time $bin --data-dir /tmp/cg-run run $sql --until-caught-up --state-cache-mib $cache" >/tmp/cg-out 2>&1
rc=$?
read wall user sys rss majflt < /tmp/cg-time
maxuse=$(( $(cat $cg/memory.max_usage_in_bytes) >> 20 ))
reads=$(grep "state reads" /tmp/cg-out)
echo "limit=${limit}MiB cache=${cache}MiB rc=$rc wall=$wall user=$user sys=$sys rss_mib=$((rss/1024)) major_faults=$majflt cgroup_max_mib=$maxuse state_mib=$(du -sm /tmp/cg-run/state | cut -f1) input_mib=$(du -sm $input | cut -f1)"
rmdir $cg 2>/dev/null; rm -rf /tmp/cg-run
