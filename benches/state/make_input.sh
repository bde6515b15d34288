#!/bin/bash
# Writes issue 11's input into a fresh data directory DIR: 9 000 auctions
# (20 categories) and N bids over 10 000 Zipf-distributed auctions (s = 1)
# and 100 000 bidders, prices uniform in 0..10^7, 4 partitions each.
# usage: make_input.sh MILLPOND_BINARY N DIR
set -euo pipefail
bin=$1; n=$2; dir=$3
here=$(dirname "$0")
rm -rf "$dir"
"$bin" --data-dir "$dir" topic create bid --partitions 4 --retention-ms 0 >/dev/null
"$bin" --data-dir "$dir" topic create auction --partitions 4 --retention-ms 0 >/dev/null
python3 "$here/zipf_bids.py" 0 auction | "$bin" --data-dir "$dir" produce auction --key-field id >/dev/null 2>&1
python3 "$here/zipf_bids.py" "$n" bid | "$bin" --data-dir "$dir" produce bid --key-field auction >/dev/null 2>&1
