#!/usr/bin/env python3
"""Summary of a results.jsonl written by run.py: counts per mode, refusal
categories, and every wrong answer with the rows that differ.

    python3 report.py [RESULTS.jsonl] [--top 15] [--wrong-limit 0]
"""

import argparse
import json
import re
from collections import Counter, defaultdict

STATUSES = ["pass", "refused", "wrong", "timeout", "error"]


def category(message):
    """A refusal message without its particulars: names, literals, numbers, positions."""
    text = message.split("\n")[0]
    text = re.sub(r"\b(at|near)?\s*(line|position)?\s*\d+:\d+\b", "", text)  # positions
    text = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'…'", text)
    text = re.sub(r"\b[tv]_?\d+\b|\b[a-e]\d+\b|\bx\d*\b", "COL", text)  # corpus names
    text = re.sub(r"-?\b\d+(\.\d+)?\b", "N", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:160]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="?", default="/tmp/millpond-slt/results.jsonl")
    parser.add_argument("--top", type=int, default=15, help="refusal categories shown")
    parser.add_argument("--wrong-limit", type=int, default=0, help="wrong answers shown (0: all)")
    args = parser.parse_args()

    meta, end, rows = {}, {}, []
    with open(args.results) as f:
        for line in f:
            record = json.loads(line)
            if record["mode"] == "meta":
                meta = record
            elif record["mode"] == "end":
                end = record
            else:
                rows.append(record)

    print(f"# sqllogictest: Millpond vs SQLite\n")
    print(f"files: {', '.join(meta.get('files', []))}")
    print(f"sample: 1 query in {meta.get('sample', 1)}" + (f", at most {meta['limit']} per file"
                                                            if meta.get("limit") else ""))
    print(f"binary: {meta.get('binary')} (built {meta.get('built')})")
    if end:
        print(f"queries run: {end['queries']} in {end['seconds']:.0f} s")
    else:
        ran = len({(r["file"], r["n"]) for r in rows if "n" in r})
        print(f"(run not finished: no end record; {ran} queries recorded)")
    for r in rows:
        if r["mode"] == "gave-up":
            print(f"gave up on {r['file']}: {r['message']}")
    skipped = [r for r in rows if r["mode"] == "sqlite"]
    setup = [r for r in rows if r["mode"] == "setup"]
    print(f"skipped (SQLite itself failed or timed out): {len(skipped)}")
    print(f"setup statements Millpond refused: {len(setup)}")
    for r in setup[:10]:
        print(f"  {r['file']}:{r['line']}: {r.get('sqlstate')} {r['message'][:200]}  <- {r['sql'][:120]!r}")

    print("\n## Totals\n")
    print(f"| mode | total | " + " | ".join(STATUSES) + " |")
    print("|---|---|" + "---|" * len(STATUSES))
    for mode in ("view", "select"):
        results = [r for r in rows if r["mode"] == mode]
        if not results:
            continue
        counts = Counter(r["status"] for r in results)
        cells = [f"{counts[s]} ({100 * counts[s] / len(results):.1f}%)" for s in STATUSES]
        print(f"| {mode} | {len(results)} | " + " | ".join(cells) + " |")
        named = sum(1 for r in results if r.get("named_view") == "pass")
        if named:
            counts["pass"] += named
            counts["wrong"] -= named
            cells = [f"{counts[s]} ({100 * counts[s] / len(results):.1f}%)" for s in STATUSES]
            print(f"| {mode}, repeated names aside (*) | {len(results)} | " + " | ".join(cells) + " |")

    print(f"\n## Refusal categories (top {args.top}; view / select counts)\n")
    groups = defaultdict(list)
    for r in rows:
        if r["mode"] in ("view", "select") and r["status"] in ("refused", "timeout"):
            groups[(r["status"], r.get("sqlstate"), category(r["message"]))].append(r)
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    for (status, state, text), members in ranked[:args.top]:
        per_mode = Counter(m["mode"] for m in members)
        example = members[0]
        print(f"- {len(members)} ({per_mode['view']} / {per_mode['select']}) {status} {state}: {text}")
        print(f"    e.g. {example['file']}:{example['line']} ({example['mode']}): {example['message'][:300]}")
        print("      " + " ".join(example["sql"].split())[:400])
    if len(ranked) > args.top:
        rest = sum(len(m) for _, m in ranked[args.top:])
        print(f"- ... {len(ranked) - args.top} more categories, {rest} results")

    wrong = [r for r in rows if r["status"] == "wrong"]
    named = [r for r in wrong if r.get("named_view") == "pass"]
    wrong = [r for r in wrong if r.get("named_view") != "pass"]
    if named:
        print(f"\n## (*) Wrong only through repeated column names ({len(named)})\n")
        print("A view whose output repeats a column name (two `?column?`, or `SELECT a, a`) reads NULL in")
        print("the repeated column through `SELECT * FROM v`; the same view with a column list,")
        print("`CREATE MATERIALIZED VIEW v (c1, c2, ...) AS ...`, holds SQLite's rows. Per file: "
              + ", ".join(f"{f} {c}" for f, c in sorted(Counter(r["file"] for r in named).items())))
        for r in named[:3]:
            print(f"- {r['file']}:{r['line']}: columns {r['duplicate_columns']}; "
                  f"ours {r['ours_only'][:2]} vs SQLite {r['sqlite_only'][:2]}")
    print(f"\n## Wrong answers ({len(wrong)})\n")
    for r in wrong[:args.wrong_limit or None]:
        print(f"### {r['file']}:{r['line']} ({r['mode']}): {r['ours_count']} rows, SQLite {r['sqlite_count']}")
        print("```sql\n" + r["sql"] + "\n```")
        print(f"ours only ({r['ours_only_count']}): {r['ours_only']}")
        print(f"SQLite only ({r['sqlite_only_count']}): {r['sqlite_only']}\n")

    errors = [r for r in rows if r["status"] == "error"]
    if errors:
        print(f"\n## Harness errors ({len(errors)})\n")
        for r in errors[:20]:
            print(f"- {r['file']}:{r['line']} ({r['mode']}): {r['message'][:300]}")


if __name__ == "__main__":
    main()
