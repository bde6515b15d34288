#!/usr/bin/env python3
"""Millpond against the sqllogictest corpus, with SQLite as the oracle.

For each corpus file: a fresh `millpond serve` on a new data directory, an
in-memory SQLite; the file's setup statements go into both (CREATE INDEX
into SQLite only); each (sampled) `query` runs in SQLite, then in Millpond
twice: as a materialized view (CREATE MATERIALIZED VIEW v_N AS ...; SELECT *
FROM v_N; DROP) and as a one-off SELECT. Each answer is compared with
SQLite's as a multiset of rows and written to results.jsonl, one line per
(query, mode): pass, refused (an error from Millpond), timeout, wrong (rows
differ) or error (the harness or the connection failed). See README.md.
Standard library and psycopg 3 only.
"""

import argparse
import fnmatch
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import psycopg

REPO_URL = "https://github.com/gregrahn/sqllogictest"
MIRROR = "/work/.mirror/gregrahn+sqllogictest/repo"  # where the agents' `fetch` tool puts it
DEFAULT_FILES = [f"test/select{i}.test" for i in range(1, 6)]
DEFAULT_BINARY = os.path.expanduser("~/.cache/millpond/target/debug/millpond")
WORK = Path("/tmp/millpond-slt")


# ---------------------------------------------------------------- corpus


class Corpus:
    """A checkout of the corpus repository, or a (bare, maybe partial) git directory."""

    def __init__(self, location):
        if location is None:
            location = MIRROR if os.path.isdir(MIRROR) else str(WORK / "corpus.git")
            if not os.path.isdir(location):
                # Blobs are fetched on demand by `git show`: only the files run are downloaded.
                subprocess.run(["git", "clone", "--bare", "--depth", "1", "--filter=blob:none", REPO_URL, location],
                               check=True)
        self.root = location
        self.git = not os.path.isdir(os.path.join(location, "test")) and (
            os.path.exists(os.path.join(location, "HEAD")) or os.path.isdir(os.path.join(location, ".git")))

    def _git(self, *args):
        git_dir = self.root if os.path.exists(os.path.join(self.root, "HEAD")) else os.path.join(self.root, ".git")
        return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True,
                              text=True).stdout

    def names(self, patterns):
        if self.git:
            every = self._git("ls-tree", "-r", "--name-only", "HEAD").split("\n")
        else:
            every = [str(p.relative_to(self.root)) for p in Path(self.root).rglob("*.test")]
        out = []
        for pattern in patterns:
            matched = sorted(n for n in every if fnmatch.fnmatchcase(n, pattern))
            if not matched:
                sys.exit(f"no corpus file matches {pattern} in {self.root}")
            out += [m for m in matched if m not in out]
        return out

    def text(self, name):
        if self.git:
            return self._git("show", f"HEAD:{name}")
        return Path(self.root, name).read_text()


def records(text):
    """The records of a .test file that apply to SQLite, as dicts, in order."""
    lines = text.split("\n")
    i, skip = 0, False
    while i < len(lines):
        line = lines[i].rstrip("\r")
        words = line.split()
        i += 1
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "skipif":
            skip = skip or words[1] == "sqlite"
            continue
        if words[0] == "onlyif":
            skip = skip or words[1] != "sqlite"
            continue
        if words[0] == "halt":
            if not skip:
                return
            skip = False
            continue
        if words[0] in ("statement", "query"):
            start, body = i, []
            while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
                body.append(lines[i].rstrip("\r"))
                i += 1
            while i < len(lines) and lines[i].strip():  # the expected results: SQLite answers instead
                i += 1
            if not skip:
                yield {"kind": words[0], "arg": words[1] if len(words) > 1 else "", "line": start,
                       "sql": "\n".join(body)}
        skip = False  # a condition applies to the next record only


# ---------------------------------------------------------------- comparison


def norm(value):
    """A Python value from either side, in a form both sides share."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if value is None or isinstance(value, (int, float, str)):
        return value
    return str(value)


def same(a, b):
    if a is None or b is None:
        return a is b
    num_a, num_b = isinstance(a, (int, float)), isinstance(b, (int, float))
    if num_a and num_b:
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return num_a == num_b and a == b


def sort_key(row):
    def key(v):
        if v is None:
            return (0, 0)
        if isinstance(v, (int, float)):
            return (1, float(f"{float(v):.8g}") if math.isfinite(v) else float(v))
        return (2, v)
    return [key(v) for v in row]


def diff(ours, theirs):
    """(ours only, SQLite's only), rows matched as a multiset with the tolerance."""
    ours, theirs = sorted(ours, key=sort_key), sorted(theirs, key=sort_key)
    if len(ours) == len(theirs) and all(
            len(a) == len(b) and all(map(same, a, b)) for a, b in zip(ours, theirs)):
        return [], []
    if len(ours) * len(theirs) > 4_000_000:  # too many to match pairwise: the sorted rows that differ
        pairs = list(zip(ours, theirs))
        bad = [(a, b) for a, b in pairs if not (len(a) == len(b) and all(map(same, a, b)))]
        return ([a for a, _ in bad] + ours[len(pairs):], [b for _, b in bad] + theirs[len(pairs):])
    left = list(theirs)
    only_ours = []
    for row in ours:
        for j, other in enumerate(left):
            if len(row) == len(other) and all(map(same, row, other)):
                del left[j]
                break
        else:
            only_ours.append(row)
    return only_ours, left


# ---------------------------------------------------------------- Millpond


class Server:
    """`millpond serve` on a fresh data directory, and one connection to it."""

    def __init__(self, binary, data_dir, log_path, timeout_s, max_rss_gib):
        self.binary, self.data_dir, self.log_path, self.timeout_s = binary, Path(data_dir), log_path, timeout_s
        self.max_rss = int(max_rss_gib * 2**30)
        self.process = self.conn = None
        self.killed = None  # why the harness killed the server, if it did
        self.start()
        threading.Thread(target=self._watch_memory, daemon=True).start()

    def _watch_memory(self):
        """Kills the server past --max-rss: a view over a cross product can take all the machine's
        memory (and the kernel's OOM killer may pick another process)."""
        while True:
            process = self.process
            if process is not None and process.poll() is None:
                try:
                    with open(f"/proc/{process.pid}/status") as f:
                        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
                except (OSError, StopIteration):
                    rss = 0
                if rss > self.max_rss:
                    self.kill(f"killed by the harness: the server's memory passed {self.max_rss / 2**30:g} GiB")
            time.sleep(0.2)

    def start(self):
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir.mkdir(parents=True)
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(
            [self.binary, "--data-dir", str(self.data_dir), "serve", "--pg-listen", "127.0.0.1:0"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        info = self.data_dir / "server.json"
        deadline = time.monotonic() + 120
        while not info.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"millpond serve did not start (see {self.log_path})")
            time.sleep(0.1)
        host, port = json.loads(info.read_text())["pg"].rsplit(":", 1)
        self.conn = psycopg.connect(host=host, port=int(port), user="millpond", dbname="millpond",
                                    sslmode="disable", autocommit=True, connect_timeout=30)
        self.conn.execute(f"SET statement_timeout = '{self.timeout_s}s'")

    def stop(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)  # SIGTERM waits for the runtime's next commit: maybe never
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.conn = self.process = None

    def execute(self, sql, fetch=False):
        """Runs one statement (simple protocol). Past the timeout the query is cancelled, and
        if that does not end it either the server is killed (the caller restarts it)."""
        cancel = threading.Timer(self.timeout_s + 5, self.conn.cancel_safe)
        kill = threading.Timer(self.timeout_s + 30, self.kill,
                               [f"killed by the harness: no answer within {self.timeout_s + 30} s"])
        cancel.start(), kill.start()
        try:
            cursor = self.conn.execute(sql)
            if not fetch:
                return None
            self.columns = [d.name for d in cursor.description]
            return [tuple(map(norm, row)) for row in cursor.fetchall()]
        finally:
            cancel.cancel(), kill.cancel()

    def kill(self, why):
        process = self.process
        if process is not None:
            self.killed = self.killed or why
            process.kill()

    def alive(self):
        return self.process.poll() is None and not self.conn.closed


def classify(error):
    """The result fields of an error from the server."""
    state = getattr(error, "sqlstate", None)
    message = error.diag.message_primary if getattr(error, "diag", None) else None
    message = message or str(error).strip()
    if state == "57014":
        status = "timeout"
    elif state is None:  # no SQLSTATE: the connection broke
        status = "error"
    else:
        status = "refused"
    return {"status": status, "sqlstate": state, "message": message[:2000]}


# ---------------------------------------------------------------- the run


def sampled(i, rate):
    """Whether the i-th query (from 0) of a file is in the sample: every rate-th, rate >= 1 (2.5: the
    0th, 3rd, 5th, 8th, ...). The same queries every run."""
    return i == 0 or math.floor(i / rate) > math.floor((i - 1) / rate)


def named_view(server, n, sql, width, expected):
    """A view that repeats a column name, again with a column list naming each column: "pass"
    here means the wrong answer came from the repeated names alone."""
    columns = ", ".join(f"c{i + 1}" for i in range(width))
    try:
        server.execute(f"CREATE MATERIALIZED VIEW v_{n}_named ({columns}) AS {sql}")
    except psycopg.Error as error:
        return classify(error)["status"]
    try:
        return "wrong" if any(diff(server.execute(f"SELECT * FROM v_{n}_named", fetch=True), expected)) else "pass"
    except psycopg.Error as error:
        return classify(error)["status"]
    finally:
        if server.alive():
            server.execute(f"DROP MATERIALIZED VIEW v_{n}_named")


def run_file(name, text, args, out, counter):
    stem = name.replace("/", "_").removesuffix(".test")
    server = Server(args.binary, WORK / "data" / stem, WORK / "logs" / f"{stem}.log", args.timeout, args.max_rss)
    lite = sqlite3.connect(":memory:")
    setup = []  # what Millpond took, to replay into a restarted server
    queries = 0
    streak, not_run = 0, 0  # queries in a row with a timeout; sampled queries not run after giving up

    def emit(record):
        out.write(json.dumps({"file": name, **record}) + "\n")
        out.flush()

    def restart():
        server.stop()
        server.killed = None
        server.start()
        if setup:  # one simple query: one batch, applied whole (each statement took before)
            server.execute(";\n".join(setup))

    try:
        for rec in records(text):
            sql = rec["sql"]
            if rec["kind"] == "statement":
                if rec["arg"] != "ok":
                    continue  # statements expected to fail set nothing up
                try:
                    lite.execute(sql)
                except sqlite3.Error:
                    continue
                if sql.lstrip().upper().startswith(("CREATE INDEX", "CREATE UNIQUE INDEX", "REINDEX", "ANALYZE")):
                    continue
                try:
                    server.execute(sql)
                    setup.append(sql)
                except psycopg.Error as error:
                    emit({"line": rec["line"], "mode": "setup", "sql": sql, **classify(error)})
                    if not server.alive():
                        restart()
                continue
            queries += 1
            if not sampled(queries - 1, args.sample) or (args.limit and queries > args.limit * args.sample):
                continue
            if args.give_up_after and streak >= args.give_up_after:
                not_run += 1
                continue
            counter[0] += 1
            n = counter[0]
            deadline = time.monotonic() + args.timeout
            lite.set_progress_handler(lambda: time.monotonic() > deadline, 10000)
            try:
                expected = [tuple(map(norm, row)) for row in lite.execute(sql).fetchall()]
            except sqlite3.Error as error:
                emit({"line": rec["line"], "n": n, "mode": "sqlite", "sql": sql, "status": "skipped",
                      "message": f"SQLite: {error}"})
                continue
            finally:
                lite.set_progress_handler(None, 0)
            modes = {"view": [f"CREATE MATERIALIZED VIEW v_{n} AS {sql}", f"SELECT * FROM v_{n}"],
                     "select": [sql]}
            timed_out = False
            for mode in args.modes:
                started = time.monotonic()
                result = {"line": rec["line"], "n": n, "mode": mode, "sql": sql}
                created = False
                try:
                    *before, read = modes[mode]
                    for statement in before:
                        server.execute(statement)
                        created = True
                    ours = server.execute(read, fetch=True)
                    only_ours, only_theirs = diff(ours, expected)
                    if only_ours or only_theirs:
                        result.update(status="wrong", ours_count=len(ours), sqlite_count=len(expected),
                                      ours_only=only_ours[:args.keep], sqlite_only=only_theirs[:args.keep],
                                      ours_only_count=len(only_ours), sqlite_only_count=len(only_theirs))
                        if mode == "view" and len(set(server.columns)) < len(server.columns):
                            result["duplicate_columns"] = server.columns
                            result["named_view"] = named_view(server, n, sql, len(server.columns), expected)
                    else:
                        result.update(status="pass", rows=len(ours))
                except psycopg.Error as error:
                    result.update(classify(error))
                    result["at"] = "create" if mode == "view" and not created else "read"
                except Exception as error:  # the harness' own failure
                    result.update(status="error", message=f"{type(error).__name__}: {error}")
                if created and server.alive():
                    try:
                        server.execute(f"DROP MATERIALIZED VIEW v_{n}")
                    except psycopg.Error as error:
                        result["drop_error"] = classify(error)
                if server.killed:
                    result.update(status="timeout", sqlstate=None, message=server.killed)
                elif server.process.poll() is not None:
                    result.update(status="error", sqlstate=None, message=f"the server died (exit status "
                                  f"{server.process.returncode}; see {server.log_path})")
                if not server.alive() or "drop_error" in result or (mode == "view" and result["status"] == "timeout"):
                    # A view that timed out may go on computing: a fresh server for what follows.
                    result["restarted"] = True
                    restart()
                timed_out = timed_out or result["status"] == "timeout"
                result["seconds"] = round(time.monotonic() - started, 3)
                emit(result)
            streak = streak + 1 if timed_out else 0
            if n % 50 == 0:
                print(f"{name}: {n} queries run", file=sys.stderr, flush=True)
        if not_run:
            emit({"mode": "gave-up", "not_run": not_run,
                  "message": f"{args.give_up_after} queries in a row timed out: {not_run} sampled queries not run"})
    finally:
        server.stop()
        lite.close()


def snapshot(binary):
    """A hard link to (or copy of) the binary: a rebuild during the run (cargo replaces the file)
    leaves the servers this run starts, restarts included, on one build."""
    target = WORK / "bin" / "millpond"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    try:
        os.link(binary, target)
    except OSError:
        shutil.copy2(binary, target)
    return str(target)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", default=DEFAULT_FILES,
                        help="corpus files or glob patterns, relative to the corpus root "
                             "(default: test/select1.test ... test/select5.test)")
    parser.add_argument("--corpus", help="a checkout or git directory of the corpus "
                        f"(default: {MIRROR} if present, else a partial clone of {REPO_URL} in {WORK})")
    parser.add_argument("--binary", default=os.environ.get("MILLPOND_BIN", DEFAULT_BINARY))
    parser.add_argument("--out", default=str(WORK / "results.jsonl"))
    parser.add_argument("--sample", type=float, default=1,
                        help="run every K-th query of each file (K >= 1, may be fractional: 2.9 runs "
                             "1 in 2.9): deterministic")
    parser.add_argument("--limit", type=int, default=0, help="at most N (sampled) queries per file")
    parser.add_argument("--modes", default="view,select", help="view, select or both (comma-separated)")
    parser.add_argument("--timeout", type=int, default=20, help="seconds per statement, both sides")
    parser.add_argument("--give-up-after", type=int, default=0,
                        help="after K queries in a row with a timeout, skip the rest of the file (0: never)")
    parser.add_argument("--max-rss", type=float, default=4, help="GiB of memory the server may use")
    parser.add_argument("--keep", type=int, default=5, help="differing rows kept per side of a wrong answer")
    args = parser.parse_args()
    args.modes = args.modes.split(",")
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"no millpond binary at {args.binary} (--binary or MILLPOND_BIN)")
    (WORK / "logs").mkdir(parents=True, exist_ok=True)
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.stat(args.binary).st_mtime))
    args.binary = snapshot(args.binary)
    corpus = Corpus(args.corpus)
    started = time.monotonic()
    counter = [0]
    with open(args.out, "w") as out:
        names = corpus.names(args.files)
        meta = {"mode": "meta", "files": names, "sample": args.sample, "limit": args.limit, "binary": args.binary,
                "built": built,
                "corpus": corpus.root, "argv": sys.argv[1:]}
        out.write(json.dumps(meta) + "\n")
        for name in names:
            print(f"{name} ...", file=sys.stderr, flush=True)
            run_file(name, corpus.text(name), args, out, counter)
        out.write(json.dumps({"mode": "end", "queries": counter[0],
                              "seconds": round(time.monotonic() - started, 1)}) + "\n")
    print(f"{counter[0]} queries in {time.monotonic() - started:.0f} s; results in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
