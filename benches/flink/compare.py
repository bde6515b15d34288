#!/usr/bin/env python3
"""Compares Flink's final rows with Millpond's, view by view.

usage: compare.py MILLPOND_DIR FLINK_ROWS.jsonl
  MILLPOND_DIR/VIEW.jsonl: `millpond view read VIEW` (one row object a line)
  FLINK_ROWS.jsonl: NexmarkFlink --materialize (lines {"view": V, "row": {...}})

Values are compared after normalising: numbers and numeric strings
(Millpond prints DECIMALs as strings) as numbers, doubles to 9 significant
digits; timestamps ('2023-11-14 22:13:20.5' or '2023-11-14T22:13:20.500') as
one form. Prints per view the row counts and up to 3 rows missing on either
side; exits 1 if any view differs.
"""
import collections
import datetime
import decimal
import json
import os
import re
import sys

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$")


def norm(v):
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return norm_number(decimal.Decimal(str(v)))
    if isinstance(v, str):
        if TIMESTAMP.match(v):
            return datetime.datetime.fromisoformat(v.replace("T", " ")).isoformat(sep=" ")
        try:
            return norm_number(decimal.Decimal(v))
        except decimal.InvalidOperation:
            return v
    return json.dumps(v, sort_keys=True)


def norm_number(d):
    if d == d.to_integral_value():
        return ("n", str(d.to_integral_value()))
    return ("n", "{:.9g}".format(d))


def key(row):
    return tuple(sorted((k, repr(norm(v))) for k, v in row.items()))


def main():
    mp_dir, flink_file = sys.argv[1], sys.argv[2]
    flink = collections.defaultdict(collections.Counter)
    with open(flink_file) as f:
        for line in f:
            rec = json.loads(line)
            flink[rec["view"]][key(rec["row"])] += 1
    views = sorted(set(flink) | {n[:-6] for n in os.listdir(mp_dir) if n.endswith(".jsonl")})
    failed = False
    for view in views:
        mp = collections.Counter()
        path = os.path.join(mp_dir, view + ".jsonl")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if line.strip():
                        mp[key(json.loads(line))] += 1
        fl = flink.get(view, collections.Counter())
        missing, extra = mp - fl, fl - mp
        same = not missing and not extra
        failed |= not same
        print(f"{view}: millpond {sum(mp.values())} rows, flink {sum(fl.values())} rows, "
              f"{'same' if same else f'{sum(missing.values())} only in millpond, {sum(extra.values())} only in flink'}")
        for label, rows in (("only in millpond", missing), ("only in flink", extra)):
            for row in list(rows)[:3]:
                print(f"  {label}: {dict(row)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
