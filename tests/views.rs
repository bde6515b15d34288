//! The view commands: `millpond view list|read` and `millpond subscribe`.
//!
//! Every test drives the real binary on its own data directory: Nexmark
//! input from `millpond gen nexmark`, the standard views from
//! `millpond job nexmark`, and the readers checked against a recomputation
//! from the input topics (read back with `millpond consume`) and against
//! each other (a snapshot plus the later changes is the later view).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The longest any one command may take before the test gives up on it.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
const VIEWS: [&str; 4] = ["bid_stats", "bidder_stats", "category_stats", "top_bids"];

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_millpond"));
    command.arg("--data-dir").arg(dir).args(args);
    command
}

/// Runs a command to its end (killed and failed after `COMMAND_TIMEOUT`).
fn millpond(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child =
        command(dir, args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} did not finish within {COMMAND_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

fn ok(dir: &Path, args: &[&str], stdin: &str) -> String {
    let output = millpond(dir, args, stdin);
    assert!(output.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

fn fails(dir: &Path, args: &[&str], stdin: &str) -> String {
    let output = millpond(dir, args, stdin);
    assert!(!output.status.success(), "{args:?} should fail; it printed {}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8(output.stderr).unwrap()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?}: {e}"))).collect()
}

/// Nexmark events `start..start + events` into two partitions per topic.
fn generate(dir: &Path, start: u64, events: u64) {
    ok(
        dir,
        &["gen", "nexmark", "--events", &events.to_string(), "--start", &start.to_string(), "--partitions", "2"],
        "",
    );
}

/// Runs the standard views until they have read all the input.
fn run_job(dir: &Path) {
    ok(dir, &["job", "nexmark", "--until-caught-up", "--epoch-ms", "20"], "");
}

/// `view list --json`, as (name → entry).
fn listed(dir: &Path) -> BTreeMap<String, Value> {
    let list: Value = serde_json::from_str(&ok(dir, &["view", "list", "--json"], "")).unwrap();
    list.as_array().unwrap().iter().map(|v| (v["name"].as_str().unwrap().to_owned(), v.clone())).collect()
}

/// The last committed epoch, from `view list --json`.
fn committed_epoch(dir: &Path) -> u64 {
    let views = listed(dir);
    let epochs: BTreeSet<u64> = views.values().map(|v| v["epoch"].as_u64().unwrap()).collect();
    assert_eq!(epochs.len(), 1, "every view of one job shows the same epoch: {views:?}");
    epochs.into_iter().next().unwrap()
}

/// The high watermark of each partition of a topic (the job must not run).
fn high_watermarks(dir: &Path, topic: &str) -> Vec<u64> {
    let described: Value = serde_json::from_str(&ok(dir, &["topic", "describe", topic, "--json"], "")).unwrap();
    described["partitions"].as_array().unwrap().iter().map(|p| p["high_watermark"].as_u64().unwrap()).collect()
}

/// A view's rows from `view read`, as (row JSON text → multiplicity). Also
/// checks the output format: one JSON object per line, sorted, a row held N
/// times printed N times, and `--counts` saying the same.
fn read_view(dir: &Path, view: &str) -> BTreeMap<String, i64> {
    let text = ok(dir, &["view", "read", view], "");
    let lines: Vec<&str> = text.lines().collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted, "view read {view} prints its rows sorted");
    let mut rows = BTreeMap::new();
    for line in lines {
        let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{view} line {line:?}: {e}"));
        assert!(row.is_object(), "{view} line {line:?} is not an object");
        *rows.entry(row.to_string()).or_insert(0) += 1;
    }
    let mut counted = BTreeMap::new();
    for line in json_lines(&ok(dir, &["view", "read", view, "--counts"], "")) {
        let count = line["count"].as_i64().unwrap_or_else(|| panic!("{view}: {line}"));
        assert!(counted.insert(line["row"].to_string(), count).is_none(), "{view}: row {line} printed twice");
    }
    assert_eq!(counted, rows, "{view}: --counts and the bag agree");
    rows
}

/// The values of every record of a topic, via `millpond consume`.
fn consumed_values(dir: &Path, topic: &str) -> Vec<Value> {
    json_lines(&ok(dir, &["consume", topic, "--from-beginning"], ""))
        .iter()
        .map(|record| serde_json::from_str(record["value"].as_str().unwrap()).unwrap())
        .collect()
}

/// The four views recomputed from the input topics.
fn recompute(dir: &Path) -> BTreeMap<&'static str, BTreeMap<String, i64>> {
    let bids: Vec<(u64, u64, u64)> = consumed_values(dir, "bid")
        .iter()
        .map(|v| (v["auction"].as_u64().unwrap(), v["bidder"].as_u64().unwrap(), v["price"].as_u64().unwrap()))
        .collect();
    let categories: BTreeMap<u64, u64> = consumed_values(dir, "auction")
        .iter()
        .map(|v| (v["id"].as_u64().unwrap(), v["category"].as_u64().unwrap()))
        .collect();
    common::nexmark_views(&bids, &categories)
}

/// Checks a subscriber's output line by line and accumulates its changes.
#[derive(Debug, Default)]
struct Stream {
    /// Row text to multiplicity, over the changes up to the last progress mark.
    rows: BTreeMap<String, i64>,
    /// Changes after the last progress mark.
    pending: Vec<(u64, String, i64)>,
    /// The epoch of the last progress mark, and of the last line.
    complete: Option<u64>,
    last_epoch: u64,
    seen: BTreeSet<(u64, String)>,
    changes: usize,
    progress_marks: Vec<u64>,
}

impl Stream {
    fn line(&mut self, line: &str) {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("subscriber line {line:?}: {e}"));
        let epoch = value["epoch"].as_u64().unwrap_or_else(|| panic!("line {line:?} has no epoch"));
        assert!(epoch >= self.last_epoch, "epochs never decrease: {line} after epoch {}", self.last_epoch);
        self.last_epoch = epoch;
        if value.get("progress").is_some() {
            assert_eq!(value, json!({"epoch": epoch, "progress": true}), "a progress mark is exactly that");
            assert!(self.complete.is_none_or(|c| epoch > c), "progress mark {epoch} twice");
            for (_, row, diff) in self.pending.drain(..) {
                *self.rows.entry(row).or_insert(0) += diff;
            }
            self.rows.retain(|_, n| *n != 0);
            self.complete = Some(epoch);
            self.progress_marks.push(epoch);
        } else {
            let fields: BTreeSet<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(fields, BTreeSet::from(["diff", "epoch", "row"]), "a change line: {line}");
            assert!(
                self.complete.is_none_or(|c| epoch > c),
                "a change at epoch {epoch}, which was already complete: {line}"
            );
            let diff = value["diff"].as_i64().unwrap();
            assert_ne!(diff, 0, "a change changes something: {line}");
            let row = value["row"].to_string();
            assert!(self.seen.insert((epoch, row.clone())), "(epoch {epoch}, row {row}) twice");
            self.pending.push((epoch, row, diff));
            self.changes += 1;
        }
    }

    fn of(text: &str) -> Stream {
        let mut stream = Stream::default();
        text.lines().for_each(|l| stream.line(l));
        stream
    }
}

/// A process running in the background; killed when dropped.
struct Background {
    child: Child,
    name: String,
}

impl Background {
    fn spawn(dir: &Path, args: &[&str]) -> Background {
        let child =
            command(dir, args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        Background { child, name: format!("{args:?}") }
    }

    /// SIGKILLs it; it must still have been running.
    fn kill(mut self) {
        assert!(self.child.try_wait().unwrap().is_none(), "{} exited early", self.name);
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `millpond subscribe` in the background, its lines checked as they come.
struct Subscriber {
    child: Child,
    stream: Arc<Mutex<Stream>>,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Subscriber {
    fn spawn(dir: &Path, args: &[&str]) -> Subscriber {
        let mut child =
            command(dir, args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (stream, lines) = (Arc::new(Mutex::new(Stream::default())), Arc::new(Mutex::new(Vec::new())));
        let (s, l) = (stream.clone(), lines.clone());
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                s.lock().unwrap().line(&line);
                l.lock().unwrap().push(line);
            }
        });
        Subscriber { child, stream, lines, reader: Some(reader) }
    }

    /// Waits until a progress mark at or after `epoch` has been printed.
    fn wait_for_progress(&self, epoch: u64) {
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        while self.stream.lock().unwrap().complete.is_none_or(|c| c < epoch) {
            assert!(self.child_running(), "the subscriber exited before epoch {epoch} was complete");
            assert!(Instant::now() < deadline, "the subscriber never completed epoch {epoch}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn child_running(&self) -> bool {
        // A panic in the reader thread (a failed check) ends it early.
        !self.reader.as_ref().unwrap().is_finished()
    }

    /// Kills it; returns its checked stream and raw lines.
    fn stop(mut self) -> (Stream, Vec<String>) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Err(panic) = self.reader.take().unwrap().join() {
            std::panic::resume_unwind(panic);
        }
        let stream = std::mem::take(&mut *self.stream.lock().unwrap());
        let lines = std::mem::take(&mut *self.lines.lock().unwrap());
        (stream, lines)
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The published checkpoint (`checkpoint.json`, the readers' copy), if any.
fn checkpoint(dir: &Path) -> Option<Value> {
    let text = std::fs::read(dir.join("checkpoint.json")).ok()?;
    Some(serde_json::from_slice(&text).unwrap())
}

/// Whether the committed source offsets of the bid and auction topics are
/// their high watermarks (taken while no job ran).
fn caught_up(dir: &Path, bids: &[u64], auctions: &[u64]) -> bool {
    let Some(meta) = checkpoint(dir) else { return false };
    let offsets = |topic: &str, n: usize| -> Vec<u64> {
        (0..n).map(|p| meta["sources"][topic][p.to_string()].as_u64().unwrap_or(0)).collect()
    };
    offsets("bid", bids.len()) == bids && offsets("auction", auctions.len()) == auctions
}

/// `changes` (from a stream) applied to `rows`.
fn apply(mut rows: BTreeMap<String, i64>, changes: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    for (row, diff) in changes {
        *rows.entry(row.clone()).or_insert(0) += diff;
    }
    rows.retain(|_, n| *n != 0);
    rows
}

#[test]
fn view_list_names_the_four_views_and_a_fresh_directory_has_none() {
    let fresh = tempfile::tempdir().unwrap();
    let fresh = fresh.path();
    let table = ok(fresh, &["view", "list"], "");
    assert_eq!(table.lines().count(), 1, "only the header: {table:?}");
    assert!(table.lines().next().unwrap().split_whitespace().next() == Some("view"), "{table:?}");
    assert_eq!(ok(fresh, &["view", "list", "--json"], "").trim(), "[]");
    let error = fails(fresh, &["view", "read", "x"], "");
    assert!(error.contains("no view named 'x'"), "{error}");
    let error = fails(fresh, &["subscribe", "x"], "");
    assert!(error.contains("no view named 'x'"), "{error}");
    // A reader never creates anything, not even the data directory.
    let missing = fresh.join("missing");
    assert_eq!(ok(&missing, &["view", "list", "--json"], "").trim(), "[]");
    assert!(!missing.exists(), "view list created the data directory");
    assert_eq!(std::fs::read_dir(fresh).unwrap().count(), 0, "the readers wrote into the fresh directory");

    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    generate(dir, 0, 3000);
    run_job(dir);
    let views = listed(dir);
    assert_eq!(views.keys().map(String::as_str).collect::<Vec<_>>(), VIEWS);
    let epoch = committed_epoch(dir);
    assert!(epoch > 0);
    for (name, view) in &views {
        let topic = format!("view.{name}");
        assert_eq!(view["changelog_topic"], topic.as_str());
        assert_eq!(view["epoch"], epoch);
        let end = view["changelog_end_offset"].as_u64().unwrap();
        assert!(end > 0, "{name} has changes");
        assert_eq!(high_watermarks(dir, &topic), [end], "{name}: the job exited, so its changelog ends at the commit");
        let mut fields: Vec<&str> = view.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["changelog_end_offset", "changelog_topic", "epoch", "name"], "{name}");
    }
    // The table: a header, then one line per view with the same figures.
    let table = ok(dir, &["view", "list"], "");
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["view", "epoch", "end", "offset", "changelog"]
    );
    let rows: Vec<Vec<String>> = lines.map(|l| l.split_whitespace().map(str::to_owned).collect()).collect();
    assert_eq!(rows.len(), 4, "{table}");
    for (row, (name, view)) in rows.iter().zip(&views) {
        let expected =
            [name.clone(), epoch.to_string(), view["changelog_end_offset"].to_string(), format!("view.{name}")];
        assert_eq!(row.as_slice(), expected.as_slice(), "{table}");
    }
    let error = fails(dir, &["view", "read", "no_such_view"], "");
    assert!(error.contains("no_such_view"), "{error}");
    let error = fails(dir, &["subscribe", "no_such_view", "--max-epochs", "0"], "");
    assert!(error.contains("no_such_view"), "{error}");
}

#[test]
fn view_read_equals_a_recomputation_from_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    generate(dir, 0, 3000);
    // Identical bids above every generated price: top_bids holds them as
    // one row with a multiplicity (2 on auction 1000, 3 on auction 1001).
    let duplicates = [
        r#"{"auction":1000,"bidder":42,"price":900000000000}"#,
        r#"{"auction":1000,"bidder":42,"price":900000000000}"#,
        r#"{"auction":1001,"bidder":43,"price":800000000000}"#,
        r#"{"auction":1001,"bidder":43,"price":800000000000}"#,
        r#"{"auction":1001,"bidder":43,"price":800000000000}"#,
    ];
    ok(dir, &["produce", "bid", "--key-field", "auction"], &(duplicates.join("\n") + "\n"));
    run_job(dir);

    let expected = recompute(dir);
    assert!(expected["bid_stats"].len() > 50, "the workload has many auctions");
    for view in VIEWS {
        let actual = read_view(dir, view);
        if actual != expected[view] {
            let missing: Vec<_> = expected[view].iter().filter(|(r, n)| actual.get(*r) != Some(n)).take(5).collect();
            let extra: Vec<_> = actual.iter().filter(|(r, n)| expected[view].get(*r) != Some(n)).take(5).collect();
            panic!("view {view} differs from the recomputation: missing {missing:?}, extra {extra:?}");
        }
    }
    // The multiplicities, as printed: a row held twice is two lines.
    let top = ok(dir, &["view", "read", "top_bids"], "");
    let held = |row: Value| json_lines(&top).into_iter().filter(|r| *r == row).count();
    assert_eq!(held(json!({"auction": 1000, "bidder": 42, "price": 900000000000u64})), 2);
    assert_eq!(held(json!({"auction": 1001, "bidder": 43, "price": 800000000000u64})), 3);
    let counted = json_lines(&ok(dir, &["view", "read", "top_bids", "--counts"], ""));
    let above_one: Vec<&Value> = counted.iter().filter(|line| line["count"].as_i64() != Some(1)).collect();
    assert_eq!(
        above_one,
        [
            &json!({"row": {"auction": 1000, "bidder": 42, "price": 900000000000u64}, "count": 2}),
            &json!({"row": {"auction": 1001, "bidder": 43, "price": 800000000000u64}, "count": 3}),
        ]
    );
    let rows_of = |auction: u64| json_lines(&top).iter().filter(|r| r["auction"] == auction).count();
    assert_eq!(rows_of(1001), 3, "3 copies fill auction 1001's top 3 (a line each)");
    assert_eq!(rows_of(1000), 3, "2 copies and the next bid fill auction 1000's top 3");
}

#[test]
fn a_subscription_snapshot_equals_view_read() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    generate(dir, 0, 3000);
    run_job(dir);
    let epoch = committed_epoch(dir);
    for view in VIEWS {
        let text = ok(dir, &["subscribe", view, "--progress", "--max-epochs", "0"], "");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.last().copied(), Some(format!(r#"{{"epoch":{epoch},"progress":true}}"#).as_str()), "{view}");
        let stream = Stream::of(&text);
        assert_eq!(stream.progress_marks, [epoch], "{view}: one progress mark, after the snapshot");
        assert!(stream.seen.iter().all(|(e, _)| *e == epoch), "{view}: snapshot rows come at the snapshot's epoch");
        assert_eq!(stream.changes, lines.len() - 1);
        assert_eq!(stream.rows, read_view(dir, view), "{view}: the snapshot is the view");
        // Without --progress, the same rows and no mark.
        let quiet = ok(dir, &["subscribe", view, "--max-epochs", "0"], "");
        assert_eq!(quiet.lines().collect::<Vec<_>>(), lines[..lines.len() - 1], "{view}");
    }
}

#[test]
fn subscribing_as_of_an_uncommitted_epoch_fails() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    generate(dir, 0, 1000);
    run_job(dir);
    let epoch = committed_epoch(dir);
    for as_of in [epoch + 1, epoch + 1000] {
        let as_of = as_of.to_string();
        for extra in [&[][..], &["--no-snapshot"][..]] {
            let mut args = vec!["subscribe", "bid_stats", "--as-of", &as_of, "--max-epochs", "1"];
            args.extend_from_slice(extra);
            let error = fails(dir, &args, "");
            assert!(error.contains("not committed yet"), "{error}");
            assert!(error.contains("bid_stats") && error.contains(&format!("epoch {as_of}")), "{error}");
            assert!(error.contains(&format!("the last committed epoch is {epoch}")), "{error}");
        }
    }
    // The committed epoch itself is fine.
    let text =
        ok(dir, &["subscribe", "bid_stats", "--as-of", &epoch.to_string(), "--progress", "--max-epochs", "0"], "");
    assert_eq!(Stream::of(&text).rows, read_view(dir, "bid_stats"));
}

#[test]
fn a_subscription_resumes_after_an_epoch_with_exactly_the_later_changes() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    generate(dir, 0, 5000);
    run_job(dir);
    let first_epoch = committed_epoch(dir);
    let first_rows = read_view(dir, "bid_stats");
    // Three more runs over more input: at least three newer epochs.
    let mut epochs = vec![first_epoch];
    for part in 1..4 {
        generate(dir, part * 5000, 5000);
        run_job(dir);
        epochs.push(committed_epoch(dir));
    }
    assert!(epochs.windows(2).all(|w| w[0] < w[1]), "each run commits: {epochs:?}");
    let last_epoch = *epochs.last().unwrap();
    let last_rows = read_view(dir, "bid_stats");

    // Follow from the first run's epoch until the last one is complete.
    let first = first_epoch.to_string();
    let subscriber =
        Subscriber::spawn(dir, &["subscribe", "bid_stats", "--as-of", &first, "--no-snapshot", "--progress"]);
    subscriber.wait_for_progress(last_epoch);
    let (stream, lines) = subscriber.stop();
    assert!(stream.pending.is_empty(), "nothing after the last epoch: {:?}", stream.pending);
    assert!(stream.changes > 0);
    assert!(stream.seen.iter().all(|(e, _)| *e > first_epoch && *e <= last_epoch), "only epochs after {first_epoch}");
    assert_eq!(stream.progress_marks.last(), Some(&last_epoch));
    // Each run changed bid_stats at an epoch of its own, and each such epoch is marked complete.
    let changed: BTreeSet<u64> = stream.seen.iter().map(|(e, _)| *e).collect();
    assert!(changed.len() >= 3, "{changed:?}");
    assert!(changed.iter().all(|e| stream.progress_marks.contains(e)), "{changed:?} {:?}", stream.progress_marks);
    assert!(stream.progress_marks.iter().all(|e| *e > first_epoch), "{:?}", stream.progress_marks);
    assert_eq!(apply(first_rows.clone(), &stream.rows), last_rows, "the snapshot at {first_epoch} plus the changes");

    // --max-epochs K stops by itself after the same output.
    let k = stream.progress_marks.len().to_string();
    let text =
        ok(dir, &["subscribe", "bid_stats", "--as-of", &first, "--no-snapshot", "--progress", "--max-epochs", &k], "");
    assert_eq!(text.lines().collect::<Vec<_>>(), lines);

    // The snapshot as of the first epoch is still the first run's view.
    let text = ok(dir, &["subscribe", "bid_stats", "--as-of", &first, "--progress", "--max-epochs", "0"], "");
    let snapshot = Stream::of(&text);
    assert_eq!(snapshot.progress_marks, [first_epoch]);
    assert_eq!(snapshot.rows, first_rows, "the snapshot as of {first_epoch}");
}

#[test]
fn a_live_subscriber_follows_the_job_across_a_kill_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    generate(dir, 0, 10_000);
    let (bids, auctions) = (high_watermarks(dir, "bid"), high_watermarks(dir, "auction"));
    let job = Background::spawn(dir, &["job", "nexmark", "--epoch-ms", "20"]);
    wait_until("the first commit", || checkpoint(dir).is_some());
    let subscriber = Subscriber::spawn(dir, &["subscribe", "bid_stats", "--progress"]);
    wait_until("the first run caught up", || caught_up(dir, &bids, &auctions));
    let first_epoch = committed_epoch(dir);
    subscriber.wait_for_progress(first_epoch);
    job.kill();

    generate(dir, 10_000, 10_000);
    let (bids, auctions) = (high_watermarks(dir, "bid"), high_watermarks(dir, "auction"));
    let job = Background::spawn(dir, &["job", "nexmark", "--epoch-ms", "20"]);
    wait_until("the second run caught up", || caught_up(dir, &bids, &auctions));
    let last_epoch = committed_epoch(dir);
    assert!(last_epoch > first_epoch);
    subscriber.wait_for_progress(last_epoch);
    job.kill();
    let (stream, _) = subscriber.stop();

    assert!(stream.pending.is_empty(), "nothing after the last epoch: {:?}", stream.pending);
    assert!(stream.seen.iter().any(|(e, _)| *e > first_epoch), "the subscriber saw the second run's changes");
    assert_eq!(committed_epoch(dir), last_epoch, "the tailing job committed nothing after catching up");
    let view = read_view(dir, "bid_stats");
    assert_eq!(stream.rows, view, "the subscriber's changes add up to the final view");
    assert_eq!(view, recompute(dir)["bid_stats"]);
}
