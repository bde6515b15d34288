//! A real disk-full run: a job on a small filesystem (a tmpfs, mounted in a
//! private mount namespace so the test needs no host privileges) fills it.
//! It must stop with a clear error naming what it could not write, lose
//! nothing that was acknowledged, and, once space is freed, resume so that
//! its view reflects every acknowledged record exactly once.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const VIEW_SQL: &str = "\
CREATE SOURCE ev (k BIGINT, n BIGINT, pad TEXT) FROM TOPIC 'ev' FORMAT JSON;
CREATE MATERIALIZED VIEW per_key AS SELECT k, COUNT(*) AS c, SUM(n) AS s FROM ev GROUP BY k;
";

/// Records `from..to`: 5 000 keys, so the view's changelog is large too.
fn records(from: u64, to: u64) -> String {
    let pad = "x".repeat(200);
    (from..to).map(|i| format!("{{\"k\":{},\"n\":{i},\"pad\":\"{pad}\"}}\n", i % 5000)).collect()
}

/// Runs `script` with bash in a new mount namespace (as root there), with
/// `MILLPOND` set to the binary; returns (status, stdout, stderr).
fn in_namespace(script: &str) -> (bool, String, String) {
    let output = Command::new("unshare")
        .args(["--mount", "--map-root-user", "bash", "-c", script])
        .env("MILLPOND", env!("CARGO_BIN_EXE_millpond"))
        .output()
        .expect("unshare (util-linux) runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn expected(held: &std::collections::BTreeSet<u64>) -> BTreeMap<i64, (i64, i64)> {
    let mut view = BTreeMap::new();
    for &i in held {
        let entry = view.entry((i % 5000) as i64).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += i as i64;
    }
    view
}

#[test]
fn a_job_that_fills_its_disk_stops_clearly_and_resumes_exactly_once_after_space_is_freed() {
    let work = tempfile::tempdir().unwrap();
    let work = std::env::var("MILLPOND_DISK_FULL_KEEP").map_or(work.path().to_path_buf(), std::path::PathBuf::from);
    let work = work.as_path();
    let data = work.join("data");
    let out = work.join("out");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("view.sql"), VIEW_SQL).unwrap();
    std::fs::write(out.join("first.jsonl"), records(0, 20_000)).unwrap();
    std::fs::write(out.join("second.jsonl"), records(20_000, 60_000)).unwrap();
    std::fs::write(out.join("third.jsonl"), records(60_000, 80_000)).unwrap();
    let (data_s, out_s) = (data.display(), out.display());
    // Everything that touches the small filesystem happens inside one
    // namespace (the mount is private to it); results land in `out`.
    let script = format!(
        r#"
set -u
M="$MILLPOND --data-dir {data_s}"
mount -t tmpfs -o size=64m tmpfs {data_s} || {{ echo "mount failed" >&2; exit 90; }}
$M topic create ev --partitions 2 >/dev/null || exit 91
$M produce ev < {out_s}/first.jsonl >/dev/null || exit 92
$M run {out_s}/view.sql --until-caught-up --epoch-ms 50 2>{out_s}/run1.err || exit 93
# More input, acknowledged while there is room; the job has not read it yet.
$M produce ev < {out_s}/second.jsonl >/dev/null 2>{out_s}/second.err || exit 94
# Fill the filesystem, leaving a few hundred KiB.
dd if=/dev/zero of={data_s}/filler bs=64k 2>/dev/null
rm {data_s}/filler; dd if=/dev/zero of={data_s}/filler bs=64k count=$(( $(df --output=avail -k {data_s} | tail -1) / 64 - 6 )) 2>/dev/null
# The job's changelog, state and checkpoints need more than that.
$M run {out_s}/view.sql --until-caught-up --epoch-ms 50 2>{out_s}/full.err
echo "full_run=$?" >{out_s}/status
# A producer is refused too, and acknowledges nothing it did not write.
$M produce ev < {out_s}/third.jsonl >{out_s}/produce.out 2>{out_s}/produce.err
echo "produce=$?" >>{out_s}/status
rm {data_s}/filler
$M run {out_s}/view.sql --until-caught-up --epoch-ms 50 2>{out_s}/resumed.err
echo "resumed=$?" >>{out_s}/status
$M view read per_key >{out_s}/view.jsonl 2>{out_s}/read.err
$M consume ev >{out_s}/consumed.jsonl
"#
    );
    let (ok, _, stderr) = in_namespace(&script);

    assert!(ok, "the script failed: {stderr}");
    let status = std::fs::read_to_string(out.join("status")).unwrap();
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_default();

    // The job ran out of space, and so did a producer: each failed with an
    // error that says so and names the file.
    assert!(status.contains("full_run=1") && status.contains("produce=1"), "{status}");
    for file in ["full.err", "produce.err"] {
        let error = read(file);
        assert!(error.contains("No space left on device"), "{file}: {error}");
        assert!(error.contains("/data/"), "{file} names the file: {error}");
        assert!(!error.contains("panicked"), "{file}: {error}");
    }
    assert!(status.contains("resumed=0"), "the job resumes once space is freed: {status} {}", read("resumed.err"));

    // The log holds the first, acknowledged file whole and no record twice,
    // and the view reflects each record the log holds exactly once.
    let consumed: Vec<serde_json::Value> =
        read("consumed.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ns: std::collections::BTreeSet<u64> = consumed
        .iter()
        .map(|r| {
            serde_json::from_str::<serde_json::Value>(r["value"].as_str().unwrap()).unwrap()["n"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(ns.len(), consumed.len(), "no record twice in the log");
    assert!((0..60_000).all(|n| ns.contains(&n)), "all acknowledged input is whole");
    // The refused producer's records are in the log exactly as far as it
    // said it produced them; the view counts them like any other.
    let reported: u64 = (read("produce.out") + &read("produce.err"))
        .lines()
        .find_map(|l| l.strip_prefix("produced ")?.split(' ').next()?.parse().ok())
        .expect("produce says how many records it produced");
    assert_eq!(ns.iter().filter(|n| **n >= 60_000).count() as u64, reported, "{}", read("produce.err"));
    let view: BTreeMap<i64, (i64, i64)> = read("view.jsonl")
        .lines()
        .map(|l| {
            let row: serde_json::Value = serde_json::from_str(l).unwrap();
            (row["k"].as_i64().unwrap(), (row["c"].as_i64().unwrap(), row["s"].as_i64().unwrap()))
        })
        .collect();
    assert_eq!(view, expected(&ns), "the view reflects every record in the log exactly once");
}

#[test]
fn the_namespace_helper_mounts_a_private_tmpfs() {
    // Guards the test above: its filesystem is really small and really private.
    let dir = tempfile::tempdir().unwrap();
    let path: &Path = dir.path();
    let script = format!(
        "mount -t tmpfs -o size=1m tmpfs {0} && dd if=/dev/zero of={0}/x bs=64k count=64 2>&1; echo done",
        path.display()
    );
    let (_, stdout, _) = in_namespace(&script);
    assert!(stdout.contains("No space left on device"), "{stdout}");
    assert!(!path.join("x").exists(), "the mount is private to the namespace");
}
