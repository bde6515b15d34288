//! End-to-end runs of the runtime on small inputs, checked against a
//! recomputation from scratch.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{changes_per_epoch, dead_letters, produce, produce_batches, rows_of, view_rows};
use millpond_dataflow::{Count, Max, Min, Runtime, RuntimeConfig, StateBackend, Sum, json};
use millpond_log::{Log, LogOptions};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
struct Bid {
    auction: u64,
    price: i64,
}

fn bids(range: std::ops::Range<u64>) -> Vec<(Option<String>, Option<String>)> {
    range
        .map(|i| {
            let auction = (i * 7919) % 13;
            let price = ((i * 104_729) % 1000) as i64;
            (Some(auction.to_string()), Some(format!(r#"{{"auction":{auction},"price":{price}}}"#)))
        })
        .collect()
}

fn expected(records: &[(Option<String>, Option<String>)]) -> BTreeMap<String, i64> {
    let mut per_auction: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    for (_, value) in records {
        if let Ok(bid) = serde_json::from_str::<Bid>(value.as_deref().unwrap_or("")) {
            per_auction.entry(bid.auction).or_default().push(bid.price);
        }
    }
    rows_of(per_auction.into_iter().map(|(auction, prices)| {
        let stats = (
            prices.len() as i64,
            prices.iter().sum::<i64>(),
            prices.iter().min().copied(),
            prices.iter().max().copied(),
        );
        ((auction, stats), 1)
    }))
}

fn run(dir: &std::path::Path, workers: usize, state: StateBackend) -> millpond_dataflow::RunStats {
    run_with(dir, workers, state, 64 << 20, 600_000)
}

fn run_with(
    dir: &std::path::Path,
    workers: usize,
    state: StateBackend,
    sink_segment_bytes: u64,
    compaction_lag_ms: u64,
) -> millpond_dataflow::RunStats {
    // Small fetches and short epochs: the input spans many epochs.
    let config = RuntimeConfig::new(dir)
        .sink_segment_bytes(sink_segment_bytes)
        .changelog_compaction_lag_ms(compaction_lag_ms)
        .workers(workers)
        .epoch_interval_ms(2)
        .fetch_bytes_max(2048)
        .state(state)
        .stop_when_caught_up(true);
    Runtime::run(config, |job| {
        // A slow decoder spreads the input over many 2 ms epochs.
        let decode = json::<Bid>();
        let bids = job.source("bid", move |record: &millpond_log::RecordView<'_>| {
            std::thread::sleep(std::time::Duration::from_micros(20));
            decode(record)
        });
        let stats = bids
            .map(|b| (b.auction, b.price))
            .aggregate("stats", (Count, Sum(|p: &i64| *p), Min(|p: &i64| *p), Max(|p: &i64| *p)));
        job.materialize("bid_stats", stats);
    })
    .unwrap()
}

#[test]
fn aggregate_view_equals_recomputation_and_bad_records_go_to_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = bids(0..5000);
    input.insert(17, (Some("x".into()), Some("{not json".into())));
    input.insert(400, (Some("y".into()), Some(r#"{"auction":"seven","price":1}"#.into())));
    produce(dir.path(), "bid", 3, &input);
    let stats = run(dir.path(), 1, StateBackend::RocksDb);
    assert_eq!(stats.records, 5002);
    assert_eq!(stats.dead_letters, 2);
    assert_eq!(view_rows(dir.path(), "bid_stats"), expected(&input));
    let letters = dead_letters(dir.path(), "bid.dead-letter");
    assert_eq!(letters.len(), 2, "{letters:?}");
    // The records as they were (not escaped into JSON), with headers that name them.
    let bad = letters.iter().find(|l| l.value.as_deref() == Some("{not json")).expect("the invalid JSON");
    assert_eq!(bad.key.as_deref(), Some("x"));
    assert!(bad.headers["millpond.error"].starts_with("invalid JSON"), "{bad:?}");
    assert!(letters.iter().any(|l| l.value.as_deref() == Some(r#"{"auction":"seven","price":1}"#)), "{letters:?}");
    let log = Log::open(dir.path(), LogOptions::default()).unwrap();
    let id = log.topic_id("bid").unwrap().to_string();
    log.close().unwrap();
    for letter in &letters {
        assert_eq!(letter.headers["millpond.source.topic"], "bid");
        assert_eq!(letter.headers["millpond.source.topic-id"], id);
        let (partition, offset) = letter.source_offset();
        assert!(partition < 3 && offset < 5002, "{letter:?}");
    }
}

/// A backlog is read in epochs of at most `epoch_records_max` records (and
/// one read's worth more), however long the clock's epochs: a view of every
/// bid changes in many epochs, each with few rows, and holds every bid once.
/// (With the clock alone, the 6000 bids would take two epochs: the run's
/// short first one and one of ten minutes.)
#[test]
fn a_backlog_is_read_in_epochs_of_at_most_the_records_limit() {
    let dir = tempfile::tempdir().unwrap();
    let input = bids(0..6000); // each (auction, price) once
    let batches: Vec<_> = input.chunks(20).map(<[_]>::to_vec).collect();
    produce_batches(dir.path(), "bid", 2, &batches);
    let (records_max, fetch_bytes_max) = (500, 2048);
    let config = RuntimeConfig::new(dir.path())
        .epoch_interval_ms(600_000)
        .epoch_records_max(records_max)
        .fetch_bytes_max(fetch_bytes_max)
        .stop_when_caught_up(true);
    let stats = Runtime::run(config, |job| {
        let bids = job.source("bid", json::<Bid>()).map(|b| (b.auction, b.price));
        job.materialize("every_bid", bids);
    })
    .unwrap();
    assert_eq!(stats.records, 6000);
    let per_epoch = changes_per_epoch(dir.path(), "every_bid");
    // A read fetches at most `fetch_bytes_max` from each of the 2 partitions
    // (over 40 bytes a record), or one batch of 20: at most 100 past the limit.
    let most = *per_epoch.values().max().unwrap();
    assert!(most <= records_max + 100, "an epoch of {most} changes: {per_epoch:?}");
    assert!(per_epoch.len() >= 10, "6000 bids in {} epochs", per_epoch.len());
    assert_eq!(per_epoch.values().sum::<u64>(), 6000, "one change per bid");
    let every_bid = rows_of(input.iter().map(|(_, value)| {
        let bid: Bid = serde_json::from_str(value.as_deref().unwrap()).unwrap();
        ((bid.auction, bid.price), 1)
    }));
    assert_eq!(view_rows(dir.path(), "every_bid"), every_bid);
}

#[test]
fn a_second_run_resumes_from_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let first = bids(0..3000);
    produce(dir.path(), "bid", 2, &first);
    let one = run(dir.path(), 1, StateBackend::RocksDb);
    assert_eq!(one.records, 3000);
    let second = bids(3000..4500);
    produce(dir.path(), "bid", 2, &second);
    let two = run(dir.path(), 2, StateBackend::RocksDb);
    assert_eq!(two.records, 1500, "only the new records are read");
    assert!(one.committed_epoch > one.first_epoch + 2, "the input spans several epochs: {one:?}");
    assert!(two.first_epoch > one.committed_epoch, "epochs keep increasing across restarts");
    let all: Vec<_> = first.into_iter().chain(second).collect();
    assert_eq!(view_rows(dir.path(), "bid_stats"), expected(&all));
    // A run with nothing new changes nothing.
    let three = run(dir.path(), 1, StateBackend::RocksDb);
    assert_eq!(three.records, 0);
    assert_eq!(view_rows(dir.path(), "bid_stats"), expected(&all));
}

#[test]
fn one_and_two_workers_and_both_backends_agree() {
    let input = bids(0..4000);
    let mut results = Vec::new();
    for (workers, state) in [(1, StateBackend::RocksDb), (2, StateBackend::RocksDb), (2, StateBackend::Memory)] {
        let dir = tempfile::tempdir().unwrap();
        produce(dir.path(), "bid", 4, &input);
        run(dir.path(), workers, state);
        results.push(view_rows(dir.path(), "bid_stats"));
    }
    assert_eq!(results[0], expected(&input));
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0], results[2]);
}

#[test]
fn a_compacted_changelog_still_gives_the_view_and_refuses_a_lost_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let mut all = Vec::new();
    let mut first_epoch = None;
    // Three runs: every auction's row changes in each, so later records supersede earlier ones.
    for part in 0..3u64 {
        let input = bids(part * 2000..(part + 1) * 2000);
        produce(dir.path(), "bid", 2, &input);
        all.extend(input);
        // No compaction lag: each commit lets the log compact up to the one before it.
        let stats = run_with(dir.path(), 1, StateBackend::RocksDb, 4096, 0);
        first_epoch.get_or_insert(stats.committed_epoch);
    }
    let before = view_rows(dir.path(), "bid_stats");
    assert_eq!(before, expected(&all));

    let log = millpond_log::Log::open(dir.path(), millpond_log::LogOptions::default()).unwrap();
    let compaction = log.compact().unwrap();
    log.close().unwrap();
    assert!(compaction.records_removed > 0, "superseded rows were compacted away: {compaction:?}");

    // A late reader still bootstraps the current contents...
    assert_eq!(view_rows(dir.path(), "bid_stats"), before);
    // ...but the first run's epoch can no longer be reconstructed, and the
    // reader says so instead of returning a wrong stream.
    match millpond_dataflow::Subscription::open(dir.path(), "bid_stats", first_epoch, true) {
        Err(millpond_dataflow::Error::EpochUnavailable { epoch, .. }) => assert_eq!(Some(epoch), first_epoch),
        other => panic!("expected EpochUnavailable, got {other:?}"),
    }
}

#[test]
fn another_process_never_compacts_a_changelog_past_the_jobs_durable_bound() {
    // The bound the job sets lives on disk: a process that opens the log
    // later (any `consume --follow` or long `produce` runs the cleaner)
    // honours it. With the default lag nothing committed is compactable yet.
    let dir = tempfile::tempdir().unwrap();
    let mut all = Vec::new();
    for part in 0..3u64 {
        let input = bids(part * 2000..(part + 1) * 2000);
        produce(dir.path(), "bid", 2, &input);
        all.extend(input);
        run_with(dir.path(), 1, StateBackend::RocksDb, 4096, 600_000);
    }
    let log = millpond_log::Log::open(dir.path(), millpond_log::LogOptions::default()).unwrap();
    let compaction = log.compact().unwrap();
    log.close().unwrap();
    assert_eq!(compaction.records_removed, 0, "nothing the bound protects is compacted: {compaction:?}");
    assert_eq!(view_rows(dir.path(), "bid_stats"), expected(&all));
}

#[test]
fn readers_refuse_epochs_the_changelog_may_have_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let mut epochs = Vec::new();
    for part in 0..3u64 {
        produce(dir.path(), "bid", 2, &bids(part * 1000..(part + 1) * 1000));
        // No compaction lag: every commit lets the log compact up to the
        // commit before it (never itself: docs/checkpoints.md).
        let config = RuntimeConfig::new(dir.path())
            .epoch_interval_ms(2)
            .changelog_compaction_lag_ms(0)
            .stop_when_caught_up(true);
        let stats = Runtime::run(config, |job| {
            let stats = job.source("bid", json::<Bid>()).map(|b| (b.auction, b.price)).aggregate("stats", Count);
            job.materialize("bid_stats", stats);
        })
        .unwrap();
        epochs.push(stats.committed_epoch);
    }
    let meta = millpond_dataflow::CheckpointMeta::read_published(dir.path()).unwrap().unwrap();
    let (compacted, _) = meta.compactable["view.bid_stats"];
    assert!(
        compacted >= epochs[1] && compacted < epochs[2],
        "with no lag an earlier commit of the last run is compactable, the last one not: {compacted}, {epochs:?}"
    );
    match millpond_dataflow::Subscription::open(dir.path(), "bid_stats", Some(epochs[0]), true) {
        Err(millpond_dataflow::Error::EpochUnavailable { epoch, reason, .. }) => {
            assert_eq!(epoch, epochs[0]);
            assert!(reason.contains("compacted"), "{reason}");
        }
        other => panic!("expected EpochUnavailable, got {other:?}"),
    }
    // The latest epoch is always readable.
    assert!(millpond_dataflow::Subscription::open(dir.path(), "bid_stats", None, true).is_ok());
}

#[test]
fn in_memory_state_restarts_from_scratch_with_later_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let input = bids(0..2000);
    produce(dir.path(), "bid", 2, &input);
    let one = run(dir.path(), 1, StateBackend::Memory);
    assert_eq!(view_rows(dir.path(), "bid_stats"), expected(&input));
    // Nothing survives in memory: the second run reads everything again,
    // rebuilds the view from an empty changelog, and numbers its epochs
    // after every epoch a reader may have seen.
    let two = run(dir.path(), 1, StateBackend::Memory);
    assert_eq!(two.records, 2000);
    assert!(two.first_epoch > one.committed_epoch, "{one:?} then {two:?}");
    assert_eq!(view_rows(dir.path(), "bid_stats"), expected(&input));
}

#[test]
fn a_view_row_that_cannot_be_json_fails_the_job_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "bid", 1, &bids(0..10));
    let config = RuntimeConfig::new(dir.path()).epoch_interval_ms(2).stop_when_caught_up(true);
    let result = Runtime::run(config, |job| {
        // A map with tuple keys has no JSON form.
        let rows = job.source("bid", json::<Bid>()).map(|b| BTreeMap::from([((b.auction, 0u8), b.price)]));
        job.materialize("maps", rows);
    });
    match result {
        Err(error @ millpond_dataflow::Error::Operator { .. }) => {
            let message = error.to_string();
            assert!(message.contains("sink 'view:maps'") && message.contains("not JSON"), "{message}")
        }
        other => panic!("expected an error naming the row, got {other:?}"),
    }
    assert!(millpond_dataflow::list_views(dir.path()).unwrap().is_empty(), "nothing was committed");
}

#[test]
fn a_job_that_has_committed_refuses_a_new_stateful_operator() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "bid", 1, &bids(0..100));
    run(dir.path(), 1, StateBackend::RocksDb);
    let config = RuntimeConfig::new(dir.path()).epoch_interval_ms(2).stop_when_caught_up(true);
    let result = Runtime::run(config, |job| {
        let bids = job.source("bid", json::<Bid>()).map(|b| (b.auction, b.price));
        let stats = bids.clone().aggregate("stats", (Count, Sum(|p: &i64| *p), Min(|p: &i64| *p), Max(|p: &i64| *p)));
        job.materialize("bid_stats", stats);
        // New: its state would miss the first run's input.
        job.materialize("counts", bids.aggregate("counts", Count));
    });
    match result {
        Err(millpond_dataflow::Error::InvalidJob(message)) => {
            assert!(message.contains("op.counts") && message.contains("new data directory"), "{message}")
        }
        other => panic!("expected the new operator to be refused, got {other:?}"),
    }
    // The committed views are untouched, and the unchanged job still runs.
    assert_eq!(view_rows(dir.path(), "bid_stats"), expected(&bids(0..100)));
    run(dir.path(), 1, StateBackend::RocksDb);
}

#[test]
fn a_snapshot_of_a_changelog_that_lost_rows_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "bid", 2, &bids(0..500));
    run(dir.path(), 1, StateBackend::RocksDb);
    let rows = view_rows(dir.path(), "bid_stats");
    assert_eq!(rows, expected(&bids(0..500)));
    let meta = millpond_dataflow::CheckpointMeta::read_published(dir.path()).unwrap().unwrap();
    assert_eq!(meta.changelogs["bid_stats"].rows, Some(rows.len() as u64), "the commit counts the rows");

    // Rewrite the changelog as a wrong compaction would leave it: as many
    // records, up to the same end offset, but one row's records now carry
    // another row's key (that row is gone from the fold).
    let log = millpond_log::Log::open(dir.path(), millpond_log::LogOptions::default()).unwrap();
    let topic = "view.bid_stats";
    let end = log.high_watermark(topic, 0).unwrap();
    let mut records = Vec::new();
    let mut offset = 0;
    while offset < end {
        let fetch = log.fetch(topic, 0, offset, 1 << 20).unwrap();
        for record in fetch.records() {
            records.push(millpond_log::Record {
                key: record.key.map(<[u8]>::to_vec),
                value: record.value.map(<[u8]>::to_vec),
                timestamp_ms: record.timestamp_ms,
                headers: record.headers(),
            });
        }
        offset = fetch.next_offset();
    }
    let (lost, kept) = (records[0].key.clone(), records[1].key.clone());
    assert_ne!(lost, kept);
    for record in records.iter_mut().filter(|r| r.key == lost) {
        record.key = kept.clone();
    }
    let config = log.topic_config(topic).unwrap();
    log.delete_topic(topic).unwrap();
    log.create_topic(topic, config).unwrap();
    log.append(topic, 0, &records).unwrap();
    assert_eq!(log.high_watermark(topic, 0).unwrap(), end);
    log.close().unwrap();

    match millpond_dataflow::read_view(dir.path(), "bid_stats") {
        Err(error @ millpond_dataflow::Error::CorruptChangelog { .. }) => {
            let message = error.to_string();
            assert!(message.contains("no longer covers committed epoch"), "{message}");
            assert!(message.contains(&format!("the checkpoint counted {}", rows.len())), "{message}");
        }
        other => panic!("expected the snapshot to be refused, got {other:?}"),
    }
}

/// A changelog append that fails (the disk is full from some write on)
/// fails the run with the append's error, from the view's append thread,
/// instead of hanging with the epoch's capability held; the next run, with
/// space again, resumes and the view matches a recomputation (nothing
/// lost, nothing twice). The first failing write is moved on until it is
/// the append's (the writes before it are the build's).
#[test]
fn a_failed_changelog_append_fails_the_run_and_the_next_run_resumes() {
    use millpond_dataflow::Topics;
    use millpond_log::storage::{FaultPlan, FaultStorage, RealStorage};
    let build = |job: &mut millpond_dataflow::Job<'_>| {
        let stats = (Count, Sum(|p: &i64| *p), Min(|p: &i64| *p), Max(|p: &i64| *p));
        let bids = job.source("bid", json::<Bid>()).map(|b| (b.auction, b.price));
        job.materialize("bid_stats", bids.aggregate("stats", stats));
    };
    let input = bids(0..3000);
    let append_failed = (1..=20u64).any(|nth_write| {
        let dir = tempfile::tempdir().unwrap();
        produce(dir.path(), "bid", 2, &input);
        let config = || RuntimeConfig::new(dir.path()).epoch_interval_ms(5).stop_when_caught_up(true);
        let plan = FaultPlan { enospc_on_write: Some(nth_write), ..FaultPlan::default() };
        let storage = Arc::new(FaultStorage::new(Arc::new(RealStorage), plan));
        let options = LogOptions { storage, ..LogOptions::default() };
        let error = match Topics::open_with(dir.path(), options).map(|t| Runtime::run_on(&t, config(), build)) {
            Ok(Err(e)) => e.to_string(),
            _ => return false, // the log did not open, or the run wrote fewer times
        };
        if !error.starts_with("sink 'view:bid_stats'") {
            return false; // a write of the build failed
        }
        // The append's own error, not that its thread stopped.
        assert!(error.contains("I/O error appending to") && error.contains("No space left"), "{error}");
        Runtime::run(config(), build).unwrap();
        assert_eq!(view_rows(dir.path(), "bid_stats"), expected(&input));
        true
    });
    assert!(append_failed, "no failed write of the first 20 was the changelog's append");
}
