//! Reader groups (`Job::shared_source_of`): each reader's view equals a
//! recomputation from its input, and records are decoded once per group
//! position, counted by the decoder.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{produce, rows_of, view_rows};
use millpond_dataflow::{Runtime, RuntimeConfig, TopicRecord, Topics};

fn record(i: u64) -> (Option<String>, Option<String>) {
    (Some(format!("k{}", i % 17)), Some(format!("v{i}")))
}

fn records(range: std::ops::Range<u64>) -> Vec<(Option<String>, Option<String>)> {
    range.map(record).collect()
}

/// Each value once: what every reader's view holds after reading `0..n`.
fn expected(n: u64) -> BTreeMap<String, i64> {
    rows_of((0..n).map(|i| (format!("v{i}"), 1)))
}

/// A job whose views `VIEW_a`, ... hold the values that readers `a`, ... read
/// from topic `t` through one group; `decodes` counts decoder calls.
fn build(readers: &'static [&'static str], decodes: Arc<AtomicU64>) -> impl Fn(&mut millpond_dataflow::Job<'_>) {
    move |job| {
        let decodes = decodes.clone();
        let decode = move |record: &millpond_log::RecordView<'_>| {
            decodes.fetch_add(1, Ordering::Relaxed);
            let value = record.value.ok_or("no value")?;
            String::from_utf8(value.to_vec()).map_err(|e| e.to_string())
        };
        let collections = job.shared_source_of("t", readers, "t", decode);
        assert_eq!(collections.len(), readers.len());
        assert!(collections.iter().all(|c| c.is_monotonic()), "as a source of its own, each never retracts");
        for (reader, values) in readers.iter().zip(collections) {
            job.materialize(&format!("view_{reader}"), values.map(|value| (*value).clone()));
        }
    }
}

fn config(dir: &std::path::Path) -> RuntimeConfig {
    RuntimeConfig::new(dir).epoch_interval_ms(5).fetch_bytes_max(1024)
}

#[test]
fn readers_at_one_position_decode_each_record_once() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "t", 3, &records(0..3000));
    let decodes = Arc::new(AtomicU64::new(0));
    let job = build(&["a", "b", "c"], decodes.clone());
    Runtime::run(config(dir.path()).stop_when_caught_up(true), job).unwrap();
    assert_eq!(decodes.load(Ordering::Relaxed), 3000, "three fresh readers: one decode per record");
    for reader in ["a", "b", "c"] {
        assert_eq!(view_rows(dir.path(), &format!("view_{reader}")), expected(3000), "reader {reader}");
    }

    // Resumed at one committed position: still one group position.
    produce(dir.path(), "t", 3, &records(3000..4000));
    decodes.store(0, Ordering::Relaxed);
    let job = build(&["a", "b", "c"], decodes.clone());
    Runtime::run(config(dir.path()).stop_when_caught_up(true), job).unwrap();
    assert_eq!(decodes.load(Ordering::Relaxed), 1000);
    for reader in ["a", "b", "c"] {
        assert_eq!(view_rows(dir.path(), &format!("view_{reader}")), expected(4000), "reader {reader}");
    }
}

#[test]
fn a_new_reader_catches_up_alone_then_shares_the_decodes() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "t", 2, &records(0..2000));
    let decodes = Arc::new(AtomicU64::new(0));
    Runtime::run(config(dir.path()).stop_when_caught_up(true), build(&["a", "b"], decodes.clone())).unwrap();
    assert_eq!(decodes.load(Ordering::Relaxed), 2000);

    // `c` is new: it reads 0..2000 alone while `a` and `b` read what is
    // appended meanwhile; once it meets them, each record is decoded once.
    decodes.store(0, Ordering::Relaxed);
    let topics = Topics::open(dir.path()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let run = {
        let (topics, stop, decodes) = (topics.clone(), stop.clone(), decodes.clone());
        let dir = dir.path().to_owned();
        std::thread::spawn(move || {
            let mut config = config(&dir);
            config.stop = stop;
            Runtime::run_on(&topics, config, build(&["a", "b", "c"], decodes)).unwrap()
        })
    };
    let appended = 2000..6000u64;
    for chunk in appended.clone().collect::<Vec<_>>().chunks(50) {
        let batch = chunk
            .iter()
            .map(|i| {
                let (key, value) = record(*i);
                TopicRecord { key: key.map(String::into_bytes), value: value.map(String::into_bytes), headers: vec![] }
            })
            .collect();
        topics.append("t", batch).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    // Every record reaches every reader: c's 6000 and a's and b's 4000, shared or not.
    let deadline = Instant::now() + Duration::from_secs(60);
    while decodes.load(Ordering::Relaxed) < 6000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    run.join().unwrap();
    topics.close().unwrap();
    let decoded = decodes.load(Ordering::Relaxed);
    // Apart, c would decode 6000 and the group of a and b 4000 (10 000). Merged
    // soon after the start, the appended records are decoded once each.
    assert!(decoded >= 6000, "c read everything: {decoded}");
    assert!(decoded < 6000 + 2000, "c joined a and b early and shared their decodes: {decoded}");
    for reader in ["a", "b", "c"] {
        assert_eq!(view_rows(dir.path(), &format!("view_{reader}")), expected(6000), "reader {reader}");
    }
}
