//! Exactly once under `kill -9`, with real processes.
//!
//! A `millpond job nexmark` process (four views: count/sum/max per auction,
//! count/min/max per bidder, a join of bids with auctions grouped by
//! category, and a top-3 per auction) is SIGKILLed at random moments and
//! restarted, round after round, alternating 1 and 2 workers. Between rounds
//! more Nexmark events and some malformed records are appended. Kills land
//! during recovery (short delays), processing and checkpointing (10 ms
//! epochs, and a 4 ms pause before each commit). A `millpond subscribe` process follows `bid_stats` throughout;
//! it is killed too, and resumes with `--as-of E --no-snapshot` from the last
//! epoch it saw complete.
//!
//! At the end, every view equals a recomputation from scratch over the
//! input topics, the dead-letter topic holds each malformed record exactly
//! once, and the subscriber's accumulated changes equal the final view, with
//! no epoch seen twice and no row twice within an epoch.
//!
//! `MILLPOND_EXACTLY_ONCE_EVENTS` sets the number of events (default
//! 120 000, about 110 000 bids and auctions), `MILLPOND_EXACTLY_ONCE_KILLS`
//! the number of kills (default 22), `MILLPOND_EXACTLY_ONCE_SEED` replays a run.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use millpond_log::{Log, LogOptions};
use serde_json::Value;

fn millpond(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_millpond"));
    command.arg("--data-dir").arg(dir);
    command
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn generate(dir: &Path, start: u64, events: u64) {
    let status = millpond(dir)
        .args(["gen", "nexmark", "--seed", "7", "--partitions", "3"])
        .args(["--start", &start.to_string(), "--events", &events.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "gen nexmark");
}

fn produce_malformed(dir: &Path, round: u64) -> u64 {
    let lines = [format!("{{\"auction\": {round}, \"price\": \"free\"}}"), format!("not json at all {round}")];
    let mut child = millpond(dir).args(["produce", "bid"]).stdin(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in &lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    assert!(child.wait().unwrap().success(), "produce malformed lines");
    lines.len() as u64
}

fn start_job(dir: &Path, workers: u64, until_caught_up: bool) -> Child {
    let mut command = millpond(dir);
    // The commit delay widens the window between writing an epoch's view
    // changes and committing them, where a kill is most dangerous.
    command.args(["job", "nexmark", "--epoch-ms", "10", "--test-commit-delay-ms", "4"]);
    command.args(["--workers", &workers.to_string()]);
    if until_caught_up {
        command.arg("--until-caught-up");
    }
    command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
}

/// What a subscriber has accumulated, and the checks on its stream.
#[derive(Default)]
struct Accumulated {
    /// Row text to multiplicity, over complete epochs only.
    rows: BTreeMap<String, i64>,
    /// The last epoch seen complete (a progress mark).
    complete: u64,
    /// Changes of the epoch(s) after `complete`, not yet marked complete.
    pending: Vec<(u64, String, i64)>,
    changes: u64,
}

impl Accumulated {
    fn line(&mut self, line: &str) {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("subscriber line {line:?}: {e}"));
        let epoch = value["epoch"].as_u64().expect("every line has an epoch");
        if value.get("progress").is_some() {
            assert!(epoch >= self.complete, "progress went back from {} to {epoch}", self.complete);
            let mut seen = BTreeSet::new();
            for (change_epoch, row, diff) in self.pending.drain(..) {
                assert!(change_epoch <= epoch, "a change of epoch {change_epoch} before progress {epoch}");
                assert!(seen.insert((change_epoch, row.clone())), "row {row} twice in epoch {change_epoch}");
                *self.rows.entry(row).or_insert(0) += diff;
                self.changes += 1;
            }
            self.rows.retain(|_, n| *n != 0);
            self.complete = epoch;
        } else {
            // A snapshot comes at the subscription's epoch; changes after it.
            assert!(
                epoch > self.complete || (self.complete == 0 && self.rows.is_empty()),
                "a change at epoch {epoch}, which was already complete ({})",
                self.complete
            );
            let diff = value["diff"].as_i64().expect("a change has a diff");
            self.pending.push((epoch, value["row"].to_string(), diff));
        }
    }
}

struct Subscriber {
    child: Child,
    reader: std::thread::JoinHandle<()>,
}

fn start_subscriber(dir: &Path, accumulated: &Arc<Mutex<Accumulated>>) -> Subscriber {
    let complete = {
        let mut acc = accumulated.lock().unwrap();
        acc.pending.clear(); // incomplete epochs come again after a resume
        acc.complete
    };
    let mut command = millpond(dir);
    command.args(["subscribe", "bid_stats", "--progress"]);
    if complete > 0 {
        command.args(["--as-of", &complete.to_string(), "--no-snapshot"]);
    }
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let acc = accumulated.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            acc.lock().unwrap().line(&line);
        }
    });
    Subscriber { child, reader }
}

fn stop_subscriber(mut subscriber: Subscriber) {
    let _ = subscriber.child.kill();
    let _ = subscriber.child.wait();
    subscriber.reader.join().unwrap();
}

fn wait_for_view(dir: &Path, view: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !millpond_dataflow::list_views(dir).unwrap().iter().any(|v| v.name == view) {
        assert!(Instant::now() < deadline, "view {view} never committed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every record value of a topic.
fn topic_values(dir: &Path, topic: &str) -> Vec<String> {
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    let mut out = Vec::new();
    for info in log.describe(topic).unwrap() {
        let mut offset = info.low_watermark;
        while offset < info.high_watermark {
            let fetch = log.fetch(topic, info.partition, offset, 1 << 20).unwrap();
            out.extend(fetch.records().map(|r| String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned()));
            offset = fetch.next_offset();
        }
    }
    log.close().unwrap();
    out
}

/// The four views, recomputed from the input topics. Returns them and the
/// number of malformed bids.
fn recompute(dir: &Path) -> (BTreeMap<&'static str, BTreeMap<String, i64>>, u64) {
    let mut malformed = 0;
    let mut bids = Vec::new();
    for value in topic_values(dir, "bid") {
        let parsed: Option<(u64, u64, u64)> = serde_json::from_str::<Value>(&value)
            .ok()
            .and_then(|v| Some((v["auction"].as_u64()?, v["bidder"].as_u64()?, v["price"].as_u64()?)));
        match parsed {
            Some(bid) => bids.push(bid),
            None => malformed += 1,
        }
    }
    let mut categories = BTreeMap::new();
    for value in topic_values(dir, "auction") {
        let v: Value = serde_json::from_str(&value).unwrap();
        categories.insert(v["id"].as_u64().unwrap(), v["category"].as_u64().unwrap());
    }
    (common::nexmark_views(&bids, &categories), malformed)
}

fn view_rows(dir: &Path, view: &str) -> BTreeMap<String, i64> {
    let snapshot = millpond_dataflow::read_view(dir, view).unwrap();
    snapshot.rows.into_iter().map(|(row, n)| (row.to_string(), n)).collect()
}

#[test]
fn views_and_subscribers_see_every_record_exactly_once_across_kill_9() {
    let events = env_u64("MILLPOND_EXACTLY_ONCE_EVENTS", 120_000);
    let kills = env_u64("MILLPOND_EXACTLY_ONCE_KILLS", 22);
    let seed = env_u64("MILLPOND_EXACTLY_ONCE_SEED", std::process::id() as u64);
    eprintln!("exactly-once: {events} events, {kills} kills, MILLPOND_EXACTLY_ONCE_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();

    // A first part of the input, then a clean first checkpoint so the
    // subscriber has a view to start on.
    let chunk = events / (kills + 2);
    let mut generated = chunk * 2;
    generate(dir, 0, generated);
    let mut malformed = produce_malformed(dir, 0);
    let mut job = start_job(dir, 1, false);
    wait_for_view(dir, "bid_stats");
    let accumulated = Arc::new(Mutex::new(Accumulated::default()));
    let mut subscriber = start_subscriber(dir, &accumulated);

    for round in 0..kills {
        // Kill at a random moment: often right after start (recovery),
        // otherwise while it processes the new input and checkpoints.
        let delay_ms = if rng.below(4) == 0 { rng.below(40) } else { rng.below(400) };
        std::thread::sleep(Duration::from_millis(delay_ms));
        job.kill().unwrap();
        let status = job.wait().unwrap();
        assert!(status.code().is_none(), "the job was killed, not exited: {status:?}");
        if rng.below(3) == 0 {
            stop_subscriber(subscriber);
            subscriber = start_subscriber(dir, &accumulated);
        }
        let more = chunk.min(events - generated);
        if more > 0 {
            generate(dir, generated, more);
            generated += more;
        }
        if round % 5 == 2 {
            malformed += produce_malformed(dir, round + 1);
        }
        job = start_job(dir, 1 + round % 2, false);
    }
    job.kill().unwrap();
    job.wait().unwrap();
    if generated < events {
        generate(dir, generated, events - generated);
    }
    // The last run finishes the input and exits.
    let mut last = start_job(dir, 2, true);
    let mut stderr = String::new();
    std::io::Read::read_to_string(last.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(last.wait().unwrap().success(), "the final run exits cleanly: {stderr}");

    let (expected, expected_malformed) = recompute(dir);
    assert_eq!(expected_malformed, malformed);
    assert!(expected["bid_stats"].len() > 100, "the workload has many auctions");
    for (view, rows) in &expected {
        let actual = view_rows(dir, view);
        if &actual != rows {
            let missing: Vec<_> = rows.iter().filter(|(r, n)| actual.get(*r) != Some(n)).take(5).collect();
            let extra: Vec<_> = actual.iter().filter(|(r, n)| rows.get(*r) != Some(n)).take(5).collect();
            panic!("view {view} differs from the recomputation: missing {missing:?}, extra {extra:?}");
        }
    }
    let letters = topic_values(dir, "bid.dead-letter");
    assert_eq!(letters.len() as u64, malformed, "each malformed record is dead-lettered exactly once");

    // The subscriber catches up with the final epoch and holds the view.
    let final_epoch = millpond_dataflow::list_views(dir).unwrap()[0].epoch;
    let deadline = Instant::now() + Duration::from_secs(60);
    while accumulated.lock().unwrap().complete < final_epoch {
        assert!(Instant::now() < deadline, "the subscriber never reached epoch {final_epoch}");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop_subscriber(subscriber);
    let accumulated = accumulated.lock().unwrap();
    assert!(accumulated.changes > 0);
    assert_eq!(accumulated.rows, expected["bid_stats"], "the subscriber's sum of changes is the final view");
}
