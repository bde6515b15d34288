//! Durability under `kill -9`: a real `millpond produce` process appends with
//! durable acknowledgements and is killed with SIGKILL at random moments,
//! over and over (during recovery, appends and segment rolls). After every
//! restart, every acknowledged record is present at its acknowledged offset,
//! in order, exactly once.
//!
//! `MILLPOND_KILL9_ROUNDS` sets the number of kills (default 12);
//! `MILLPOND_KILL9_SEED` replays a run.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use millpond_log::partitioner::partition_for_key;

const PARTITIONS: u32 = 3;
const KEYS: u64 = 50;

fn millpond(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_millpond"));
    command.arg("--data-dir").arg(dir);
    command
}

fn line_for(seq: u64) -> String {
    format!(r#"{{"k":"key{}","seq":{seq}}}"#, seq % KEYS)
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// One acknowledged record: where the child said it is.
#[derive(Debug, Clone, Copy)]
struct Acked {
    seq: u64,
    partition: u32,
    offset: u64,
}

/// Runs one producer, feeding lines from `first_seq`, kills it after
/// `kill_after` (or lets it finish), and returns what it acknowledged.
fn run_round(dir: &Path, first_seq: u64, lines: u64, batch: u64, kill_after: Option<Duration>) -> Vec<Acked> {
    let mut child = millpond(dir)
        .args(["produce", "t", "--key-field", "k", "--report", "--batch-records", &batch.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn millpond produce");
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let mut text = String::new();
        for seq in first_seq..first_seq + lines {
            text.push_str(&line_for(seq));
            text.push('\n');
        }
        let _ = stdin.write_all(text.as_bytes()); // fails once the child is killed
    });
    let stdout = child.stdout.take().unwrap();
    let reader =
        std::thread::spawn(move || BufReader::new(stdout).lines().map_while(Result::ok).collect::<Vec<String>>());
    if let Some(delay) = kill_after {
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
    }
    let status = child.wait().unwrap();
    if kill_after.is_none() {
        assert!(status.success(), "an unkilled producer exits cleanly");
    }
    feeder.join().unwrap();
    let reports = reader.join().unwrap();

    let mut acked = Vec::new();
    for report in reports {
        // A killed child may leave half a line; only whole JSON lines count.
        let Ok(report) = serde_json::from_str::<serde_json::Value>(&report) else { continue };
        let first_line = report["first_line"].as_u64().unwrap();
        let last_line = report["last_line"].as_u64().unwrap();
        let mut next_offset: HashMap<u32, (u64, u64)> = HashMap::new();
        for append in report["appends"].as_array().unwrap() {
            let partition = append["partition"].as_u64().unwrap() as u32;
            next_offset
                .insert(partition, (append["base_offset"].as_u64().unwrap(), append["last_offset"].as_u64().unwrap()));
        }
        for line in first_line..=last_line {
            let seq = first_seq + line - 1;
            let partition = partition_for_key(format!("key{}", seq % KEYS).as_bytes(), PARTITIONS);
            let (offset, last) = next_offset.get_mut(&partition).expect("report covers every partition it used");
            assert!(*offset <= *last, "report offsets cover the records routed to the partition");
            acked.push(Acked { seq, partition, offset: *offset });
            *offset += 1;
        }
        for (partition, (offset, last)) in next_offset {
            assert_eq!(offset, last + 1, "partition {partition}: report offsets match the routed records");
        }
    }
    acked
}

/// Reads the whole topic back through the CLI: partition -> [(offset, seq)].
fn read_back(dir: &Path) -> BTreeMap<u32, Vec<(u64, u64)>> {
    let output = millpond(dir).args(["consume", "t", "--from-beginning"]).output().unwrap();
    assert!(output.status.success(), "consume failed: {}", String::from_utf8_lossy(&output.stderr));
    let mut partitions: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        let value: serde_json::Value = serde_json::from_str(record["value"].as_str().unwrap()).unwrap();
        partitions
            .entry(record["partition"].as_u64().unwrap() as u32)
            .or_default()
            .push((record["offset"].as_u64().unwrap(), value["seq"].as_u64().unwrap()));
    }
    for records in partitions.values_mut() {
        records.sort_unstable();
    }
    partitions
}

#[test]
fn acknowledged_records_survive_kill_9() {
    let rounds: u64 = std::env::var("MILLPOND_KILL9_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(12);
    let seed: u64 = std::env::var("MILLPOND_KILL9_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("kill9: seed {seed} (MILLPOND_KILL9_SEED={seed} replays), {rounds} rounds");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let created = millpond(dir.path())
        .args(["topic", "create", "t", "--partitions", &PARTITIONS.to_string(), "--segment-bytes", "8192"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));

    let mut acked_all: Vec<Acked> = Vec::new();
    let mut next_seq = 0u64;
    let mut total_kills = 0;
    for round in 0..=rounds {
        let lines = 20_000;
        let batch = 1 + rng.below(60);
        let kill_after = (round < rounds).then(|| Duration::from_millis(30 + rng.below(500)));
        let acked = run_round(dir.path(), next_seq, lines, batch, kill_after);
        total_kills += usize::from(kill_after.is_some());
        eprintln!(
            "kill9: round {round}: batch {batch}, killed after {kill_after:?}, {} records acknowledged",
            acked.len()
        );
        next_seq += lines;
        acked_all.extend(acked);

        // After every restart: each acknowledged record is where it was acknowledged.
        let log = read_back(dir.path());
        let mut at: HashMap<(u32, u64), u64> = HashMap::new();
        let mut seen_seqs = HashMap::new();
        for (&partition, records) in &log {
            for (i, &(offset, seq)) in records.iter().enumerate() {
                assert_eq!(offset, i as u64, "partition {partition}: offsets are dense from 0");
                assert!(seen_seqs.insert(seq, (partition, offset)).is_none(), "seq {seq} appears twice");
                at.insert((partition, offset), seq);
            }
            assert!(records.windows(2).all(|w| w[0].1 < w[1].1), "partition {partition}: records keep their order");
        }
        for a in &acked_all {
            assert_eq!(
                at.get(&(a.partition, a.offset)),
                Some(&a.seq),
                "round {round}: acknowledged seq {} at {}/{} is missing or different (seed {seed})",
                a.seq,
                a.partition,
                a.offset
            );
        }
    }
    assert!(total_kills >= 10 || rounds < 10, "the test kills the producer many times");
    assert!(acked_all.len() > 20_000, "enough records were acknowledged to mean something: {}", acked_all.len());
}
