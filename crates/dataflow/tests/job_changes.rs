//! A job that changes over the life of a data directory: views added with
//! new (fresh) readers, views refused when their state would miss input,
//! and views dropped with `RuntimeConfig::drop_undeclared`. Every view is
//! checked against a recomputation over the whole input.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{dead_letters, produce, rows_of, state_entries, view_rows};
use millpond_dataflow::state::{RocksStore, StateStore};
use millpond_dataflow::{
    CheckpointMeta, Count, Error, Job, Max, Multiplicity, RunStats, Runtime, RuntimeConfig, StateBackend, Subscription,
    Sum, json, list_views, read_view,
};
use millpond_log::{CleanupPolicy, Log, LogOptions, Record, TopicConfig};
use serde::Deserialize;

type Input = Vec<(Option<String>, Option<String>)>;

#[derive(Clone, Debug, Deserialize)]
struct Bid {
    auction: u64,
    price: i64,
}

fn bids(range: std::ops::Range<u64>) -> Input {
    range
        .map(|i| {
            let auction = (i * 7919) % 11;
            let price = ((i * 104_729) % 1000) as i64;
            (Some(auction.to_string()), Some(format!(r#"{{"auction":{auction},"price":{price}}}"#)))
        })
        .collect()
}

fn valid_bids(input: &[(Option<String>, Option<String>)]) -> Vec<Bid> {
    input.iter().filter_map(|(_, v)| serde_json::from_str(v.as_deref()?).ok()).collect()
}

/// `bid_stats`: (auction, (count, sum)).
fn expected_stats(input: &[(Option<String>, Option<String>)]) -> BTreeMap<String, i64> {
    let mut per_auction: BTreeMap<u64, (i64, i64)> = BTreeMap::new();
    for bid in valid_bids(input) {
        let entry = per_auction.entry(bid.auction).or_default();
        *entry = (entry.0 + 1, entry.1 + bid.price);
    }
    rows_of(per_auction.into_iter().map(|row| (row, 1)))
}

/// `bid_max`: (auction, max price).
fn expected_max(input: &[(Option<String>, Option<String>)]) -> BTreeMap<String, i64> {
    let mut per_auction: BTreeMap<u64, i64> = BTreeMap::new();
    for bid in valid_bids(input) {
        let entry = per_auction.entry(bid.auction).or_insert(i64::MIN);
        *entry = (*entry).max(bid.price);
    }
    rows_of(per_auction.into_iter().map(|(auction, max)| ((auction, Some(max)), 1)))
}

/// Which views a run declares, and how.
#[derive(Clone, Copy, Debug)]
struct Views {
    /// `bid_stats` from the reader named after the topic.
    stats: bool,
    /// `bid_max` from this reader, if any.
    max_reader: Option<&'static str>,
}

const STATS_ONLY: Views = Views { stats: true, max_reader: None };
const BOTH: Views = Views { stats: true, max_reader: Some("bid_max") };

fn build(job: &mut Job<'_>, views: Views) {
    if views.stats {
        let bids = job.source("bid", json::<Bid>()).map(|b| (b.auction, b.price));
        job.materialize("bid_stats", bids.aggregate("stats", (Count, Sum(|p: &i64| *p))));
    }
    if let Some(reader) = views.max_reader {
        let bids = job.source_named(reader, "bid", json::<Bid>()).map(|b| (b.auction, b.price));
        job.materialize("bid_max", bids.aggregate("maxes", Max(|p: &i64| *p)));
    }
}

fn config(dir: &Path, state: StateBackend) -> RuntimeConfig {
    RuntimeConfig::new(dir).epoch_interval_ms(2).fetch_bytes_max(2048).state(state).stop_when_caught_up(true)
}

fn run(dir: &Path, state: StateBackend, views: Views) -> RunStats {
    Runtime::run(config(dir, state), move |job| build(job, views)).unwrap()
}

fn run_dropping(dir: &Path, state: StateBackend, views: Views) -> RunStats {
    Runtime::run(config(dir, state).drop_undeclared(true), move |job| build(job, views)).unwrap()
}

fn view_names(dir: &Path) -> Vec<String> {
    list_views(dir).unwrap().into_iter().map(|v| v.name).collect()
}

fn topics(dir: &Path) -> Vec<String> {
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    let topics = log.topics();
    log.close().unwrap();
    topics
}

fn published(dir: &Path) -> CheckpointMeta {
    CheckpointMeta::read_published(dir).unwrap().expect("a checkpoint is published")
}

fn refusal(result: millpond_dataflow::Result<RunStats>) -> String {
    match result {
        Err(Error::InvalidJob(message)) => message,
        other => panic!("expected the job to be refused, got {other:?}"),
    }
}

/// A bad record among the bids: one letter, however many readers reject it.
fn with_a_bad_record(mut input: Input) -> Input {
    input.insert(7, (Some("x".into()), Some("{not json".into())));
    input
}

#[test]
fn a_new_view_fed_by_a_new_reader_of_a_read_topic_is_built_from_the_whole_input() {
    for state in [StateBackend::RocksDb, StateBackend::Memory] {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let first = with_a_bad_record(bids(0..2000));
        produce(dir, "bid", 2, &first);
        let one = run(dir, state, STATS_ONLY);
        assert_eq!(one.records, 2001, "{state:?}");
        assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&first), "{state:?}");

        // The second run adds `bid_max`, fed by a new reader of the same topic.
        let second = bids(2000..3000);
        produce(dir, "bid", 2, &second);
        let two = run(dir, state, BOTH);
        let all: Input = first.iter().chain(&second).cloned().collect();
        let old_reader_reads = if state == StateBackend::RocksDb { second.len() } else { all.len() };
        assert_eq!(two.records as usize, old_reader_reads + all.len(), "{state:?}: the new reader reads everything");
        assert_eq!(view_rows(dir, "bid_max"), expected_max(&all), "{state:?}");
        assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all), "{state:?}: the old view continues");
        assert_eq!(view_names(dir), ["bid_max", "bid_stats"], "{state:?}");
        // Both readers rejected the bad record: it has one letter, in the
        // topic's one dead-letter topic (the new reader was behind its mark).
        let letters = dead_letters(dir, "bid.dead-letter");
        assert_eq!(letters.len(), 1, "{state:?}: {letters:?}");
        assert_eq!(letters[0].value.as_deref(), Some("{not json"), "{state:?}");
        assert!(!topics(dir).iter().any(|t| t == "bid_max.dead-letter"), "{state:?}");

        // From now on both readers resume.
        let third = bids(3000..3500);
        produce(dir, "bid", 2, &third);
        let three = run(dir, state, BOTH);
        let all: Input = all.into_iter().chain(third.iter().cloned()).collect();
        if state == StateBackend::RocksDb {
            assert_eq!(three.records as usize, 2 * third.len(), "both readers resume from their own offsets");
            let meta = published(dir);
            assert_eq!(meta.sources.keys().collect::<Vec<_>>(), ["bid", "bid_max"]);
            assert_eq!(meta.readers, BTreeMap::from([("bid".into(), "bid".into()), ("bid_max".into(), "bid".into())]));
            assert_eq!(meta.version, millpond_dataflow::CHECKPOINT_VERSION);
        }
        assert_eq!(view_rows(dir, "bid_max"), expected_max(&all), "{state:?}");
        assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all), "{state:?}");
    }
}

#[test]
fn a_fresh_reader_starts_at_the_log_start_offset_after_retention() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    let small_segments =
        TopicConfig { partitions: 1, segment_bytes: 1024, retention_bytes: Some(4096), ..TopicConfig::default() };
    log.create_topic("bid", small_segments).unwrap();
    log.close().unwrap();
    let input = bids(0..1000);
    common::produce_batches(dir, "bid", 1, &input.chunks(20).map(<[_]>::to_vec).collect::<Vec<_>>());
    run(dir, StateBackend::RocksDb, STATS_ONLY);

    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    assert!(log.enforce_retention().unwrap() > 0, "retention deletes old segments");
    let log_start = log.low_watermark("bid", 0).unwrap() as usize;
    log.close().unwrap();
    assert!(log_start > 0);

    let two = run(dir, StateBackend::RocksDb, BOTH);
    assert_eq!(two.skipped_offsets, 0, "a fresh reader has nothing to skip");
    assert_eq!(two.records as usize, input.len() - log_start, "it reads what is retained");
    assert_eq!(view_rows(dir, "bid_max"), expected_max(&input[log_start..]));
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&input), "the old view had read everything");
}

#[test]
fn a_reader_that_read_nothing_is_no_longer_fresh_once_its_start_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // `bid` exists but is empty: the reader records where it started.
    run(dir, StateBackend::RocksDb, STATS_ONLY);
    assert_eq!(published(dir).sources["bid"], BTreeMap::from([(0, 0)]));
    produce(dir, "bid", 1, &bids(0..100));
    let message = refusal(Runtime::run(config(dir, StateBackend::RocksDb), |job| {
        let bids = job.source("bid", json::<Bid>()).map(|b| (b.auction, b.price));
        job.materialize("bid_stats", bids.clone().aggregate("stats", (Count, Sum(|p: &i64| *p))));
        job.materialize("bid_max", bids.aggregate("maxes", Max(|p: &i64| *p)));
    }));
    assert!(message.contains("'extremes.maxes' is new"), "{message}");
}

#[test]
fn a_new_view_fed_by_a_resuming_reader_is_refused_with_its_name_and_the_readers() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let input = bids(0..500);
    produce(dir, "bid", 2, &input);
    // The first run reads `bid` with two readers: `bid` and `bid_old`.
    let one = Runtime::run(config(dir, StateBackend::RocksDb), |job| {
        build(job, STATS_ONLY);
        old_reader(job);
    })
    .unwrap();

    // `bid_max` fed by the reader `bid`, which resumes after the first run's input.
    let message = refusal(Runtime::run(config(dir, StateBackend::RocksDb), |job| {
        let bids = job.source("bid", json::<Bid>()).map(|b| (b.auction, b.price));
        job.materialize("bid_stats", bids.clone().aggregate("stats", (Count, Sum(|p: &i64| *p))));
        job.materialize("bid_max", bids.aggregate("maxes", Max(|p: &i64| *p)));
        old_reader(job);
    }));
    assert!(message.contains("'extremes.maxes' is new") && message.contains("reader(s) bid that resume"), "{message}");
    // A view with no operator in between is refused by its own name.
    let message = refusal(Runtime::run(config(dir, StateBackend::RocksDb), |job| {
        build(job, STATS_ONLY);
        let prices = old_reader(job);
        job.materialize("prices", prices);
    }));
    assert!(message.contains("'vidx.prices' is new") && message.contains("reader(s) bid_old that"), "{message}");

    // Nothing was committed by the refused runs.
    assert_eq!(published(dir).epoch, one.committed_epoch);
    assert_eq!(view_names(dir), ["bid_stats"]);
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&input));
}

/// Reads `bid` with the reader `bid_old` (prices only).
fn old_reader<'s>(job: &mut Job<'s>) -> millpond_dataflow::Collection<'s, i64> {
    job.source_named("bid_old", "bid", json::<Bid>()).map(|b| b.price)
}

#[test]
fn a_view_joining_a_fresh_reader_with_a_resuming_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    produce(dir, "bid", 2, &bids(0..500));
    Runtime::run(config(dir, StateBackend::RocksDb), |job| {
        build(job, STATS_ONLY);
        old_reader(job);
    })
    .unwrap();
    let message = refusal(Runtime::run(config(dir, StateBackend::RocksDb), |job| {
        build(job, STATS_ONLY);
        let old = old_reader(job).map(|price| (price % 7, price));
        let fresh = job.source_named("bid_fresh", "bid", json::<Bid>()).map(|b| (b.price % 7, b.auction));
        job.materialize("pairs", old.join("pairs", fresh).map(|(k, (price, auction))| (k, price, auction)));
    }));
    assert!(message.contains("'op.pairs' is new") && message.contains("reader(s) bid_old that"), "{message}");
    assert!(!message.contains("bid_fresh"), "a fresh reader is not blamed: {message}");

    // The same join of two fresh readers is accepted and correct.
    Runtime::run(config(dir, StateBackend::RocksDb), |job| {
        build(job, STATS_ONLY);
        old_reader(job);
        let left = job.source_named("left_fresh", "bid", json::<Bid>()).map(|b| (b.auction, b.price));
        let right = job.source_named("right_fresh", "bid", json::<Bid>()).map(|b| (b.auction, ()));
        let counts = left
            .join("pairs", right.distinct("auctions"))
            .map(|(auction, _)| (auction, ()))
            .aggregate("pair_counts", Count);
        job.materialize("pair_counts", counts);
    })
    .unwrap();
    let mut per_auction: BTreeMap<u64, i64> = BTreeMap::new();
    for bid in valid_bids(&bids(0..500)) {
        *per_auction.entry(bid.auction).or_default() += 1;
    }
    assert_eq!(view_rows(dir, "pair_counts"), rows_of(per_auction.into_iter().map(|(a, n)| ((a, n), 1))));
}

#[test]
fn a_reader_keeps_its_topic() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    produce(dir, "bid", 1, &bids(0..100));
    produce(dir, "other", 1, &bids(0..100));
    run(dir, StateBackend::RocksDb, BOTH);
    let message = refusal(Runtime::run(config(dir, StateBackend::RocksDb), |job| {
        build(job, STATS_ONLY);
        let bids = job.source_named("bid_max", "other", json::<Bid>()).map(|b| (b.auction, b.price));
        job.materialize("bid_max", bids.aggregate("maxes", Max(|p: &i64| *p)));
    }));
    assert!(message.contains("reader 'bid_max' has committed offsets in topic 'bid'"), "{message}");
}

#[test]
fn lineage_follows_every_operator() {
    let dir = tempfile::tempdir().unwrap();
    let seen: Arc<Mutex<BTreeMap<&'static str, BTreeSet<String>>>> = Arc::default();
    let record = seen.clone();
    Runtime::run(config(dir.path(), StateBackend::Memory), move |job| {
        let record = |name: &'static str, lineage: &BTreeSet<String>| {
            record.lock().unwrap().insert(name, lineage.clone());
        };
        let a = job.source("a", json::<Bid>()).map(|b| (b.auction, b.price));
        let b = job.source_named("b_reader", "b", json::<Bid>()).map(|b| (b.auction, b.price));
        let c = job.source_named("c_reader", "c", json::<Bid>()).map(|b| (b.auction, b.price));
        record("map", a.lineage());
        let filtered = a.clone().filter(|_| true).negate().inspect(|_| ()).flat_map(Some).explode(|x| Some((x, 1)));
        record("filter/negate/inspect/flat_map/explode", filtered.lineage());
        record("concat", a.clone().concat(b.clone()).lineage());
        record("aggregate", b.clone().aggregate("sum", Count).lineage());
        record("top_k", c.clone().top_k("top", 2).lineage());
        record("distinct", c.clone().distinct("distinct").lineage());
        record("join", a.clone().join("join", c.clone()).lineage());
        record("left_join", b.clone().left_join("left_join", c.clone()).lineage());
        record("from_differential", c.from_differential(a.clone().into_differential()).lineage());
        record("with_lineage_of", c.from_differential(a.clone().into_differential()).with_lineage_of(&b).lineage());
        let table =
            job.upsert_source_named("t_reader", "table", "t", |k: &[u8]| Ok(k.to_vec()), |v: &[u8]| Ok(v.len()));
        record("upsert", table.lineage());
    })
    .unwrap();
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    let seen = seen.lock().unwrap();
    let expected = BTreeMap::from([
        ("map", set(&["a"])),
        ("filter/negate/inspect/flat_map/explode", set(&["a"])),
        ("concat", set(&["a", "b_reader"])),
        ("aggregate", set(&["b_reader"])),
        ("top_k", set(&["c_reader"])),
        ("distinct", set(&["c_reader"])),
        ("join", set(&["a", "c_reader"])),
        ("left_join", set(&["b_reader", "c_reader"])),
        ("from_differential", set(&["c_reader"])),
        ("with_lineage_of", set(&["b_reader", "c_reader"])),
        ("upsert", set(&["t_reader"])),
    ]);
    assert_eq!(*seen, expected);
}

#[test]
fn drop_undeclared_removes_a_view_its_reader_state_and_topics_and_the_name_starts_over_later() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let first = with_a_bad_record(bids(0..1500));
    produce(dir, "bid", 2, &first);
    run(dir, StateBackend::RocksDb, BOTH);
    assert_eq!(view_rows(dir, "bid_max"), expected_max(&first));
    assert!(state_entries(dir, "extremes.maxes") > 0 && state_entries(dir, "vidx.bid_max") > 0);
    let mut subscription = Subscription::open(dir, "bid_max", None, true).unwrap();
    let mut held = BTreeMap::new();
    fold_available(&mut subscription, &mut held);
    assert_eq!(held, expected_max(&first));

    // The second run no longer declares `bid_max` (nor its reader).
    let second = bids(1500..2000);
    produce(dir, "bid", 2, &second);
    let two = run_dropping(dir, StateBackend::RocksDb, STATS_ONLY);
    assert_eq!(
        two.dropped,
        ["reader bid_max", "state extremes.maxes", "state vidx.bid_max", "topic view.bid_max", "view bid_max"]
    );
    assert_eq!(view_names(dir), ["bid_stats"]);
    assert!(matches!(read_view(dir, "bid_max"), Err(Error::UnknownView(name)) if name == "bid_max"));
    assert!(matches!(Subscription::open(dir, "bid_max", None, true), Err(Error::UnknownView(_))));
    let (held, error) = drain(&mut subscription, held);
    assert!(held.is_empty(), "a live subscription retracts a dropped view's rows: {held:?}");
    assert!(
        matches!(error, Error::ViewDropped { ref view, recreated: false, .. } if view == "bid_max"),
        "then it says the view was dropped: {error}"
    );
    let left = topics(dir);
    assert!(!left.iter().any(|t| t == "view.bid_max" || t == "bid_max.dead-letter"), "{left:?}");
    assert!(left.iter().any(|t| t == "view.bid_stats") && left.iter().any(|t| t == "bid.dead-letter"), "{left:?}");
    assert_eq!(state_entries(dir, "extremes.maxes"), 0);
    assert_eq!(state_entries(dir, "vidx.bid_max"), 0);
    assert!(state_entries(dir, "op.stats") > 0, "declared state stays");
    let meta = published(dir);
    assert_eq!(meta.sources.keys().collect::<Vec<_>>(), ["bid"]);
    assert_eq!(meta.readers.keys().collect::<Vec<_>>(), ["bid"]);
    assert_eq!(meta.states, BTreeSet::from(["op.stats".to_owned(), "vidx.bid_stats".to_owned()]));
    assert!(!meta.sinks.contains_key("view.bid_max") && !meta.compactable.contains_key("view.bid_max"));
    let all: Input = first.iter().chain(&second).cloned().collect();
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all));

    // Nothing is left to drop.
    assert!(run_dropping(dir, StateBackend::RocksDb, STATS_ONLY).dropped.is_empty());

    // A later `bid_max` is a new view with a fresh reader: rebuilt from scratch.
    let third = bids(2000..2300);
    produce(dir, "bid", 2, &third);
    let four = run_dropping(dir, StateBackend::RocksDb, BOTH);
    assert!(four.dropped.is_empty(), "{:?}", four.dropped);
    let all: Input = all.into_iter().chain(third).collect();
    assert_eq!(view_rows(dir, "bid_max"), expected_max(&all));
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all));
    assert_eq!(dead_letters(dir, "bid.dead-letter").len(), 1, "the bad record is not dead-lettered again");
}

#[test]
fn a_drop_is_committed_even_by_a_run_with_no_new_input() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    produce(dir, "bid", 2, &bids(0..300));
    let one = run(dir, StateBackend::RocksDb, BOTH);
    let two = run_dropping(dir, StateBackend::RocksDb, STATS_ONLY);
    assert_eq!(two.records, 0);
    assert!(two.committed_epoch > one.committed_epoch, "the drop is a commit of its own: {one:?} then {two:?}");
    assert_eq!(view_names(dir), ["bid_stats"]);
    assert!(!topics(dir).iter().any(|t| t == "view.bid_max"));
    // It is durable: a run that does not drop still does not see it.
    run(dir, StateBackend::RocksDb, STATS_ONLY);
    assert_eq!(view_names(dir), ["bid_stats"]);
    assert!(!published(dir).sources.contains_key("bid_max"));
}

#[test]
fn drop_undeclared_with_in_memory_state_deletes_the_topics_of_views_no_longer_declared() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let first = bids(0..1000);
    produce(dir, "bid", 2, &first);
    run(dir, StateBackend::Memory, BOTH);
    assert_eq!(view_rows(dir, "bid_max"), expected_max(&first));

    // In memory nothing is in the checkpoint at startup: the undeclared
    // view's topics are orphans, deleted at startup.
    let two = run_dropping(dir, StateBackend::Memory, STATS_ONLY);
    assert_eq!(two.dropped, ["topic view.bid_max"]);
    assert_eq!(view_names(dir), ["bid_stats"]);
    assert!(matches!(read_view(dir, "bid_max"), Err(Error::UnknownView(_))));
    assert!(!topics(dir).iter().any(|t| t == "view.bid_max"));

    let second = bids(1000..1200);
    produce(dir, "bid", 2, &second);
    run_dropping(dir, StateBackend::Memory, BOTH);
    let all: Input = first.into_iter().chain(second).collect();
    assert_eq!(view_rows(dir, "bid_max"), expected_max(&all));
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all));
}

#[test]
fn without_drop_undeclared_nothing_is_dropped_and_a_view_declared_again_resumes() {
    for state in [StateBackend::RocksDb, StateBackend::Memory] {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let first = bids(0..1000);
        produce(dir, "bid", 2, &first);
        run(dir, state, BOTH);

        let second = bids(1000..1500);
        produce(dir, "bid", 2, &second);
        let two = run(dir, state, STATS_ONLY);
        assert!(two.dropped.is_empty(), "{state:?}");
        assert!(topics(dir).iter().any(|t| t == "view.bid_max"), "{state:?}");
        let all: Input = first.iter().chain(&second).cloned().collect();
        if state == StateBackend::RocksDb {
            // Still listed, with the contents of its last commit.
            assert_eq!(view_names(dir), ["bid_max", "bid_stats"]);
            assert_eq!(view_rows(dir, "bid_max"), expected_max(&first));
            assert!(state_entries(dir, "extremes.maxes") > 0);
            let meta = published(dir);
            assert!(meta.sources.contains_key("bid_max") && meta.states.contains("extremes.maxes"));
        }
        assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all), "{state:?}");

        // Declared again, with its reader: it resumes where both stopped.
        run(dir, state, BOTH);
        assert_eq!(view_rows(dir, "bid_max"), expected_max(&all), "{state:?}");
        assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all), "{state:?}");
    }
}

#[test]
fn drop_undeclared_deletes_orphan_sink_topics_but_not_topics_it_reads_or_does_not_own() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let input = with_a_bad_record(bids(0..200));
    produce(dir, "bid", 1, &input);
    run(dir, StateBackend::RocksDb, STATS_ONLY);
    // What a crash between a dropping commit and the deletion leaves: a
    // changelog no checkpoint lists. Next to it, look-alikes that are not
    // orphans: a topic the job reads, and one with several partitions.
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    let changelog = TopicConfig { partitions: 1, cleanup_policy: CleanupPolicy::Compact, ..TopicConfig::default() };
    for topic in ["view.ghost", "view.input"] {
        log.create_topic(topic, changelog.clone()).unwrap();
        log.append(topic, 0, &[Record::new(Some(&b"{}"[..]), Some(&1i64.to_be_bytes()[..]), 0)]).unwrap();
    }
    log.create_topic("view.wide", TopicConfig { partitions: 2, ..TopicConfig::default() }).unwrap();
    log.close().unwrap();

    let stats = Runtime::run(config(dir, StateBackend::RocksDb).drop_undeclared(true), |job| {
        build(job, STATS_ONLY);
        job.source_named("changelog_reader", "view.input", millpond_dataflow::raw());
    })
    .unwrap();
    assert_eq!(stats.dropped, ["topic view.ghost"]);
    let left = topics(dir);
    for topic in ["view.input", "view.wide", "view.bid_stats", "bid", "bid.dead-letter"] {
        assert!(left.iter().any(|t| t == topic), "{topic} is kept: {left:?}");
    }
    assert!(!left.iter().any(|t| t == "view.ghost"), "{left:?}");
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&input));
}

/// Version 2 of the checkpoint meta (before named readers), as the
/// previous build wrote it.
#[derive(serde::Serialize)]
struct CheckpointMetaV2 {
    version: u32,
    epoch: u64,
    sources: BTreeMap<String, BTreeMap<u32, u64>>,
    sinks: BTreeMap<String, u64>,
    views: BTreeMap<String, String>,
    compactable: BTreeMap<String, (u64, u64)>,
    states: BTreeSet<String>,
}

impl From<CheckpointMeta> for CheckpointMetaV2 {
    fn from(meta: CheckpointMeta) -> Self {
        let CheckpointMeta { epoch, sources, sinks, views, compactable, states, .. } = meta;
        CheckpointMetaV2 { version: 2, epoch, sources, sinks, views, compactable, states }
    }
}

#[test]
fn a_version_2_checkpoint_resumes_with_every_reader_named_after_its_topic() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let first = bids(0..1000);
    produce(dir, "bid", 2, &first);
    run(dir, StateBackend::RocksDb, STATS_ONLY);

    // Rewrite the checkpoint as the previous build would have left it.
    let v2 = CheckpointMetaV2::from(published(dir));
    assert_eq!(v2.sources.keys().collect::<Vec<_>>(), ["bid"]);
    {
        let store = RocksStore::open(dir.join("state")).unwrap();
        let mut batch = millpond_dataflow::state::WriteBatch::new();
        batch.put(store.keyspace("checkpoint").unwrap(), b"meta", &postcard::to_stdvec(&v2).unwrap());
        store.commit(batch, true).unwrap();
    }
    std::fs::write(dir.join("checkpoint.json"), serde_json::to_vec(&v2).unwrap()).unwrap();
    // Readers take a version 2 checkpoint.json.
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&first));
    assert_eq!(published(dir).readers, BTreeMap::from([("bid".to_owned(), "bid".to_owned())]));

    let second = bids(1000..1400);
    produce(dir, "bid", 2, &second);
    let two = run(dir, StateBackend::RocksDb, BOTH);
    assert_eq!(two.records as usize, second.len() + first.len() + second.len(), "`bid` resumed, `bid_max` is new");
    let all: Input = first.into_iter().chain(second).collect();
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all));
    assert_eq!(view_rows(dir, "bid_max"), expected_max(&all));
    let meta = published(dir);
    assert_eq!(meta.version, millpond_dataflow::CHECKPOINT_VERSION);
    assert_eq!(meta.readers, BTreeMap::from([("bid".into(), "bid".into()), ("bid_max".into(), "bid".into())]));
}

/// Folds everything `subscription` yields into `rows` (JSON to
/// multiplicity, what it had yielded before), checking that each progress
/// mark leaves no row negative, until it fails; returns the rows and the
/// error.
fn drain(subscription: &mut Subscription, mut rows: BTreeMap<String, i64>) -> (BTreeMap<String, i64>, Error) {
    loop {
        match subscription.next_timeout(std::time::Duration::ZERO) {
            Ok(Some(millpond_dataflow::Event::Change { row, diff, .. })) => {
                let count = rows.entry(row.to_string()).or_insert(0);
                *count += diff;
                if *count == 0 {
                    rows.remove(&row.to_string());
                }
            }
            Ok(Some(millpond_dataflow::Event::Progress { .. })) => {
                assert!(rows.values().all(|c| *c > 0), "a progress mark with a negative row: {rows:?}");
            }
            Ok(None) => panic!("the subscription ran dry without failing: {rows:?}"),
            Err(error) => return (rows, error),
        }
    }
}

/// Folds what `subscription` has committed so far (it must not fail).
fn fold_available(subscription: &mut Subscription, rows: &mut BTreeMap<String, i64>) -> usize {
    let mut retractions = 0;
    while let Some(event) = subscription.next_timeout(std::time::Duration::ZERO).unwrap() {
        if let millpond_dataflow::Event::Change { row, diff, .. } = event {
            retractions += usize::from(diff < 0);
            let count = rows.entry(row.to_string()).or_insert(0);
            *count += diff;
            if *count == 0 {
                rows.remove(&row.to_string());
            }
        }
    }
    retractions
}

/// `v` under one of two definitions, each with readers and operators of its own.
fn versioned_bids<'s>(job: &mut Job<'s>, reader: &str) -> millpond_dataflow::Collection<'s, (u64, i64)> {
    job.source_named(reader, "bid", json::<Bid>()).map(|b| (b.auction, b.price))
}

fn build_versioned(job: &mut Job<'_>, definition: Option<&str>) {
    let bids = versioned_bids;
    match definition {
        Some(definition @ ("stats" | "stats_again")) => {
            // Two definitions with the same rows.
            let bids = bids(job, "v_stats");
            let rows = bids.aggregate("v_stats", (Count, Sum(|p: &i64| *p))).map(|(a, (c, s))| (a, Some(c * 1000 + s)));
            job.materialize_definition("v", definition, rows);
        }
        Some("max") => {
            let bids = bids(job, "v_max");
            job.materialize_definition("v", "max", bids.aggregate("v_max", Max(|p: &i64| *p)));
        }
        Some(definition @ ("unique_stats" | "unique_stats_again")) => {
            // The rows of "stats", one per auction: unique by construction.
            let bids = bids(job, "v_unique");
            let rows =
                bids.aggregate("v_unique", (Count, Sum(|p: &i64| *p))).map(|(a, (c, s))| (a, Some(c * 1000 + s)));
            job.materialize_view("v", definition, Multiplicity::Unique, rows);
        }
        _ => {
            // Something else keeps the job non-empty.
            let bids = bids(job, "other");
            job.materialize("other", bids.aggregate("other", Count));
        }
    }
}

fn run_versioned(dir: &Path, definition: Option<&'static str>) -> RunStats {
    run_versioned_on(dir, definition, 1)
}

fn run_versioned_on(dir: &Path, definition: Option<&'static str>, workers: usize) -> RunStats {
    let config = config(dir, StateBackend::RocksDb).drop_undeclared(true).workers(workers);
    Runtime::run(config, move |job| build_versioned(job, definition)).unwrap()
}

fn expected_versioned(input: &Input, definition: &str) -> BTreeMap<String, i64> {
    if definition == "max" {
        return expected_max(input);
    }
    assert!(matches!(definition, "stats" | "stats_again" | "unique_stats" | "unique_stats_again"), "{definition}");
    let mut per_auction: BTreeMap<u64, i64> = BTreeMap::new();
    for bid in valid_bids(input) {
        *per_auction.entry(bid.auction).or_default() += 1000 + bid.price;
    }
    rows_of(per_auction.into_iter().map(|(auction, v)| ((auction, Some(v)), 1)))
}

#[test]
fn a_replaced_view_retracts_the_old_definition_for_live_and_resumed_subscribers() {
    replaced_view_retracts_the_old_definition(1, 1);
}

/// The view's rows are folded by the worker each row hashes to, so a
/// replacement retracts each worker's share: written by one worker and
/// replaced by two, or written and replaced by two.
#[test]
fn a_replaced_view_retracts_the_old_definition_whatever_the_workers() {
    replaced_view_retracts_the_old_definition(1, 2);
    replaced_view_retracts_the_old_definition(2, 2);
}

/// A definition replaced while the view's readers resume: the new rows
/// would miss the input before their offsets, so the run is refused with
/// an error that says so, and the view keeps its rows.
#[test]
fn a_view_redefined_over_resuming_readers_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let input = bids(0..900);
    produce(dir, "bid", 2, &input);
    run_versioned(dir, Some("stats"));
    let config = config(dir, StateBackend::RocksDb).drop_undeclared(true);
    let refused = Runtime::run(config, |job| build_versioned(job, Some("stats_again"))).unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("view 'v' has a new definition") && message.contains("v_stats"), "{message}");
    assert_eq!(published(dir).changelogs["v"].definition, "stats");
    assert_eq!(view_rows(dir, "v"), expected_versioned(&input, "stats"));
}

fn replaced_view_retracts_the_old_definition(first_workers: usize, workers: usize) {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let first = bids(0..1200);
    produce(dir, "bid", 2, &first);
    run_versioned_on(dir, Some("stats"), first_workers);
    assert_eq!(view_rows(dir, "v"), expected_versioned(&first, "stats"));
    let before = published(dir);
    assert_eq!(before.changelogs["v"].definition, "stats");
    let mut live = Subscription::open(dir, "v", None, true).unwrap();
    let mut live_rows = BTreeMap::new();
    fold_available(&mut live, &mut live_rows);
    assert_eq!(live_rows, expected_versioned(&first, "stats"));

    // Replaced: the changelog stays, the old rows are retracted, the new ones follow.
    let second = bids(1200..1500);
    produce(dir, "bid", 2, &second);
    let two = run_versioned_on(dir, Some("max"), workers);
    let all: Input = first.iter().chain(&second).cloned().collect();
    assert_eq!(view_rows(dir, "v"), expected_versioned(&all, "max"));
    assert!(two.dropped.contains(&"state op.v_stats".to_owned()), "{:?}", two.dropped);
    let after = published(dir);
    assert_eq!(after.views["v"], before.views["v"], "the changelog is kept");
    let definition = &after.changelogs["v"];
    assert_eq!((definition.definition.as_str(), definition.since), ("max", before.changelogs["v"].since));
    assert!(definition.defined > before.epoch, "{definition:?}");
    let retractions = fold_available(&mut live, &mut live_rows);
    assert!(retractions > 0, "the old rows are retracted");
    assert_eq!(live_rows, expected_versioned(&all, "max"), "a live subscriber holds exactly the new contents");

    // A subscriber that resumes after the old definition's last epoch gets the same.
    let mut resumed = Subscription::open(dir, "v", Some(before.epoch), false).unwrap();
    let mut resumed_rows = expected_versioned(&first, "stats");
    fold_available(&mut resumed, &mut resumed_rows);
    assert_eq!(resumed_rows, expected_versioned(&all, "max"));

    // A run with nothing new retracts nothing again.
    let three = run_versioned_on(dir, Some("max"), workers);
    assert!(three.dropped.is_empty());
    assert_eq!(fold_available(&mut live, &mut live_rows), 0);
    assert_eq!(live_rows, expected_versioned(&all, "max"));

    // Dropped: a live subscriber's rows are retracted, then it fails.
    run_versioned_on(dir, None, workers);
    let (held, error) = drain(&mut live, live_rows);
    assert!(held.is_empty(), "{held:?}");
    assert!(matches!(error, Error::ViewDropped { recreated: false, .. }), "{error}");
    let dropped_at = published(dir).epoch;

    // Created again: a new changelog; resuming from before it is refused.
    run_versioned_on(dir, Some("stats"), workers);
    assert_eq!(view_rows(dir, "v"), expected_versioned(&all, "stats"));
    assert!(published(dir).changelogs["v"].since > dropped_at);
    let refused = Subscription::open(dir, "v", Some(after.epoch), false).unwrap_err();
    assert!(matches!(refused, Error::EpochUnavailable { .. }), "{refused}");
    assert!(refused.to_string().contains("fresh snapshot"), "{refused}");
}

/// A view unique by construction keeps only its index's head (no entry
/// per row) while its marker follows the commits; a replacement of its
/// definition first replays the changelog into row entries, so the old
/// rows are retracted exactly (for a live subscriber too), and the index
/// holds rows from then on, whatever the next definition.
#[test]
fn a_unique_views_index_holds_no_rows_until_a_replacement_replays_them_from_the_changelog() {
    for (first_workers, workers) in [(1, 1), (1, 2), (2, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let first = bids(0..1200);
        produce(dir, "bid", 2, &first);
        run_versioned_on(dir, Some("unique_stats"), first_workers);
        assert_eq!(view_rows(dir, "v"), expected_versioned(&first, "unique_stats"));
        assert_eq!(state_entries(dir, "vidx.v"), 1, "only the head");
        assert_eq!(applied_marker(dir, "view.v"), Some(published(dir).sinks["view.v"]));
        let mut live = Subscription::open(dir, "v", None, true).unwrap();
        let mut live_rows = BTreeMap::new();
        fold_available(&mut live, &mut live_rows);

        // Resumed over more bids that change old keys: still no row entries.
        let second = bids(1200..1800);
        produce(dir, "bid", 2, &second);
        run_versioned_on(dir, Some("unique_stats"), workers);
        let two: Input = first.iter().chain(&second).cloned().collect();
        assert_eq!(view_rows(dir, "v"), expected_versioned(&two, "unique_stats"));
        assert_eq!(state_entries(dir, "vidx.v"), 1, "only the head");

        // Replaced by a definition of any multiplicity: exact retractions.
        let third = bids(1800..2100);
        produce(dir, "bid", 2, &third);
        run_versioned_on(dir, Some("max"), first_workers);
        let all: Input = two.iter().chain(&third).cloned().collect();
        assert_eq!(view_rows(dir, "v"), expected_versioned(&all, "max"));
        assert!(fold_available(&mut live, &mut live_rows) > 0);
        assert_eq!(live_rows, expected_versioned(&all, "max"), "a live subscriber holds exactly the new rows");
        assert_eq!(state_rows(dir, "v"), expected_versioned(&all, "max"), "the index holds every row now");

        // Unique again: the index keeps its rows, and they stay right.
        run_versioned_on(dir, Some("unique_stats_again"), workers);
        assert_eq!(view_rows(dir, "v"), expected_versioned(&all, "unique_stats"));
        assert_eq!(state_rows(dir, "v"), expected_versioned(&all, "unique_stats"));
        fold_available(&mut live, &mut live_rows);
        assert_eq!(live_rows, expected_versioned(&all, "unique_stats"));
    }
}

/// A replay cut short by a crash may leave row entries in an index whose
/// head still says it holds none, some for rows whose records compaction
/// later removes. The next replay starts from an emptied keyspace, so such
/// an entry (here: a hash no row has, at an offset past the changelog's
/// end) does not outlive it and the replacement retracts exactly.
#[test]
fn a_replay_cut_short_by_a_crash_leaves_nothing_the_next_one_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let input = bids(0..900);
    produce(dir, "bid", 2, &input);
    run_versioned(dir, Some("unique_stats"));
    assert_eq!(state_entries(dir, "vidx.v"), 1, "only the head");
    let store = RocksStore::open(dir.join("state")).unwrap();
    let mut stale = millpond_dataflow::state::WriteBatch::new();
    let entry: Vec<u8> = [1i64.to_be_bytes(), (u64::MAX / 2).to_be_bytes()].concat();
    stale.put(store.keyspace("vidx.v").unwrap(), &[7; 16], &entry);
    store.commit(stale, true).unwrap();
    drop(store);
    run_versioned(dir, Some("max"));
    assert_eq!(view_rows(dir, "v"), expected_versioned(&input, "max"));
    assert_eq!(state_rows(dir, "v"), expected_versioned(&input, "max"), "the stale entry is gone");
}

#[test]
fn a_live_subscriber_of_a_view_dropped_and_created_again_between_polls_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let input = bids(0..600);
    produce(dir, "bid", 2, &input);
    run_versioned(dir, Some("max"));
    let mut live = Subscription::open(dir, "v", None, true).unwrap();
    let mut rows = BTreeMap::new();
    fold_available(&mut live, &mut rows);
    assert_eq!(rows, expected_max(&input));
    run_versioned(dir, None);
    run_versioned(dir, Some("max"));
    let (held, error) = drain(&mut live, rows);
    assert!(held.is_empty(), "{held:?}");
    assert!(matches!(error, Error::ViewDropped { recreated: true, .. }), "{error}");
    assert!(error.to_string().contains("created again"), "{error}");
}

/// `bid` with small segments and size retention; `input` produced in batches of 20.
fn produce_with_retention(dir: &Path, input: &Input) {
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    if !log.topics().iter().any(|t| t == "bid") {
        let small_segments =
            TopicConfig { partitions: 1, segment_bytes: 1024, retention_bytes: Some(4096), ..TopicConfig::default() };
        log.create_topic("bid", small_segments).unwrap();
    }
    log.close().unwrap();
    common::produce_batches(dir, "bid", 1, &input.chunks(20).map(<[_]>::to_vec).collect::<Vec<_>>());
}

/// Enforces retention; returns the log start offset of `bid`.
fn enforce_retention(dir: &Path) -> u64 {
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    assert!(log.enforce_retention().unwrap() > 0, "retention deletes old segments");
    let start = log.low_watermark("bid", 0).unwrap();
    log.close().unwrap();
    start
}

#[test]
fn a_retention_gap_fails_a_resuming_reader_by_default_and_is_reported_when_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let first = bids(0..200);
    produce_with_retention(dir, &first);
    run(dir, StateBackend::RocksDb, STATS_ONLY);
    let committed = published(dir).sources["bid"][&0];
    assert_eq!(committed, first.len() as u64);

    // While the job is stopped, much more arrives and retention deletes some of it unread.
    let second = bids(200..1200);
    produce_with_retention(dir, &second);
    let log_start = enforce_retention(dir);
    assert!(log_start > committed, "retention passed the reader: {log_start} > {committed}");

    let refused = Runtime::run(config(dir, StateBackend::RocksDb), |job| build(job, STATS_ONLY)).unwrap_err();
    assert!(
        matches!(&refused, Error::RetentionGap { reader, partition: 0, from, to, .. }
            if reader == "bid" && *from == committed && *to == log_start),
        "{refused}"
    );
    assert!(refused.to_string().contains("--on-retention-gap skip"), "the error says what to do: {refused}");
    assert_eq!(published(dir).sources["bid"][&0], committed, "nothing was committed past the gap");

    let config = config(dir, StateBackend::RocksDb).on_retention_gap(millpond_dataflow::RetentionGapPolicy::Skip);
    let skipped = Runtime::run(config, |job| build(job, STATS_ONLY)).unwrap();
    let gap = millpond_dataflow::RetentionGap {
        reader: "bid".into(),
        topic: "bid".into(),
        partition: 0,
        from: committed,
        to: log_start,
    };
    assert_eq!(skipped.retention_gaps, [gap]);
    assert_eq!(skipped.skipped_offsets, log_start - committed);
    let all: Input = first.iter().chain(&second).cloned().collect();
    let read: Input = first.iter().chain(&all[log_start as usize..]).cloned().collect();
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&read), "the view has exactly what was read");
}

#[test]
fn a_reader_whose_committed_offsets_the_log_no_longer_has_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    for part in 0..3 {
        produce(dir, "bid", 1, &bids(part * 100..(part + 1) * 100)); // a batch each
    }
    run(dir, StateBackend::RocksDb, STATS_ONLY);
    // The log loses its tail (as a repair of a corrupt segment would cut it).
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    log.truncate("bid", 0, 100).unwrap();
    log.close().unwrap();
    produce(dir, "bid", 1, &bids(300..400));
    let refused = refusal(Runtime::run(config(dir, StateBackend::RocksDb), |job| build(job, STATS_ONLY)));
    assert!(refused.contains("committed offset 300 of bid/0") && refused.contains("ends at 200"), "{refused}");
}

#[test]
fn a_source_topic_deleted_and_created_again_is_not_resumed_at_the_old_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    produce(dir, "bid", 1, &bids(0..500));
    run(dir, StateBackend::RocksDb, STATS_ONLY);
    let id = published(dir).topic_ids["bid"].clone();
    assert_eq!(id.len(), 32, "the reader's topic incarnation is committed: {id}");
    // The topic is deleted and created again with fewer records: its
    // offsets now mean other records.
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    log.delete_topic("bid").unwrap();
    log.close().unwrap();
    produce(dir, "bid", 1, &bids(1000..1700));
    let refused = refusal(Runtime::run(config(dir, StateBackend::RocksDb), |job| build(job, STATS_ONLY)));
    assert!(refused.contains("deleted and created again") && refused.contains(&id), "{refused}");
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&bids(0..500)), "the view is untouched");
    // A new reader (a new view) reads the new incarnation from its start.
    let both = run_dropping(dir, StateBackend::RocksDb, Views { stats: false, max_reader: Some("bid_max_2") });
    assert!(both.dropped.contains(&"reader bid".to_owned()), "{:?}", both.dropped);
    assert_eq!(view_rows(dir, "bid_max"), expected_max(&bids(1000..1700)));
}

#[test]
fn a_declared_source_that_no_reader_reads_still_cuts_its_dead_letters_to_the_committed_end() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    produce(dir, "bid", 2, &with_a_bad_record(bids(0..100)));
    run(dir, StateBackend::RocksDb, STATS_ONLY);
    assert_eq!(dead_letters(dir, "bid.dead-letter").len(), 1);
    // What a crash after an epoch's dead-letter append and before its commit leaves.
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    log.append("bid.dead-letter", 0, &[Record::new(None, Some(&b"uncommitted"[..]), 0)]).unwrap();
    log.close().unwrap();
    assert_eq!(dead_letters(dir, "bid.dead-letter").len(), 2);
    // A run that keeps the source but reads only another topic.
    produce(dir, "other", 1, &[(None, Some("{}".into()))]);
    Runtime::run(config(dir, StateBackend::RocksDb), |job| {
        job.declare_source("bid", "bid", "");
        let other = job.source("other", millpond_dataflow::raw());
        job.materialize("others", other.map(|record| record.value));
    })
    .unwrap();
    let letters = dead_letters(dir, "bid.dead-letter");
    assert_eq!(letters.len(), 1, "was: the uncommitted letter stayed: {letters:?}");
    assert_eq!(letters[0].value.as_deref(), Some("{not json"));
}

/// A view's index as (row JSON text, multiplicity): each row entry's row
/// read from the changelog record at the offset it gives (docs/state.md,
/// view index layout 1; the entry with the empty key holds the hash key).
fn state_rows(dir: &Path, view: &str) -> BTreeMap<String, i64> {
    let store = RocksStore::open(dir.join("state")).unwrap();
    let space = store.keyspace(&format!("vidx.{view}")).unwrap();
    let mut entries = Vec::new();
    store
        .scan_prefix(space, b"", &mut |key, value| {
            if !key.is_empty() {
                assert_eq!((key.len(), value.len()), (16, 16), "a row entry is a hash and (count, offset)");
                let count = i64::from_be_bytes(value[..8].try_into().unwrap());
                entries.push((count, u64::from_be_bytes(value[8..].try_into().unwrap())));
            }
            true
        })
        .unwrap();
    drop(store);
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    let mut rows = BTreeMap::new();
    for (count, offset) in entries {
        let fetch = log.fetch(&format!("view.{view}"), 0, offset, 1 << 16).unwrap();
        let record = fetch.records().find(|r| r.offset == offset).expect("the record the index gives");
        assert_eq!(record.value, Some(&count.to_be_bytes()[..]), "the record holds the index's count");
        rows.insert(String::from_utf8(record.key.unwrap().to_vec()).unwrap(), count);
    }
    log.close().unwrap();
    rows
}

/// The changelog offset a view's index is applied through (docs/state.md).
fn applied_marker(dir: &Path, topic: &str) -> Option<u64> {
    let store = RocksStore::open(dir.join("state")).unwrap();
    let space = store.keyspace("checkpoint.indexed").unwrap();
    store.get(space, topic.as_bytes()).unwrap().map(|bytes| postcard::from_bytes(&bytes).unwrap())
}

/// What a crash between a view's commit and its index's apply loses: the
/// view's marker (`checkpoint.indexed`), and with `rows` its whole index.
fn lose_view_state(dir: &Path, view: &str, rows: bool) {
    let store = RocksStore::open(dir.join("state")).unwrap();
    let mut batch = millpond_dataflow::state::WriteBatch::new();
    if rows {
        batch.delete_keyspace(store.keyspace(&format!("vidx.{view}")).unwrap());
    }
    batch.delete(store.keyspace("checkpoint.indexed").unwrap(), format!("view.{view}").as_bytes());
    store.commit(batch, true).unwrap();
}

/// A run of `bid_stats` over 1500 bids, committed: the bids and the
/// changelog's committed end.
fn first_stats_run(dir: &Path) -> (Input, u64) {
    let first = bids(0..1500);
    produce(dir, "bid", 2, &first);
    run(dir, StateBackend::RocksDb, STATS_ONLY);
    (first, published(dir).sinks["view.bid_stats"])
}

/// Runs `bid_stats` again over 1500 more bids that change every auction,
/// and checks its changelog and its index against a recomputation over
/// `first` and them.
fn second_stats_run(dir: &Path, first: &Input) -> RunStats {
    let second = bids(1500..3000);
    produce(dir, "bid", 2, &second);
    let stats = run(dir, StateBackend::RocksDb, STATS_ONLY);
    let all: Input = first.iter().chain(&second).cloned().collect();
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all), "the changelog reads as the recomputation");
    assert_eq!(state_rows(dir, "bid_stats"), expected_stats(&all), "the index is the changelog's last records");
    assert_eq!(applied_marker(dir, "view.bid_stats"), Some(published(dir).sinks["view.bid_stats"]));
    stats
}

#[test]
fn a_view_state_whose_apply_was_lost_is_replayed_from_its_changelog() {
    // A view's state writes are applied after its commit (the changelog
    // holds them); a crash in between loses them. Here the whole state and
    // its marker are lost, the worst case: the next run must replay the
    // changelog before the view reads a multiplicity, or every old row's
    // next record is wrong (and readers refuse the changelog).
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (first, end) = first_stats_run(dir);
    assert_eq!(applied_marker(dir, "view.bid_stats"), Some(end), "the marker follows the commit");
    assert_eq!(state_rows(dir, "bid_stats"), expected_stats(&first));
    lose_view_state(dir, "bid_stats", true);
    assert!(state_rows(dir, "bid_stats").is_empty());
    second_stats_run(dir, &first);
}

/// Rewrites the committed views `views` of the directory into the layout
/// before view index layout 1: `view.NAME` (row JSON -> postcard count)
/// with its marker in `checkpoint.applied`, listed as such in the meta.
fn rewrite_to_the_layout_before_the_index(dir: &Path, views: &[&str]) {
    let mut meta = published(dir);
    let rows: Vec<_> = views.iter().map(|view| state_rows(dir, view)).collect();
    let store = RocksStore::open(dir.join("state")).unwrap();
    let old_markers = store.keyspace("checkpoint.applied").unwrap();
    let mut batch = millpond_dataflow::state::WriteBatch::new();
    for (view, rows) in views.iter().zip(rows) {
        let topic = format!("view.{view}");
        assert!(meta.states.remove(&format!("vidx.{view}")));
        meta.states.insert(topic.clone());
        batch.delete_keyspace(store.keyspace(&format!("vidx.{view}")).unwrap());
        batch.delete(store.keyspace("checkpoint.indexed").unwrap(), topic.as_bytes());
        let old = store.keyspace(&topic).unwrap();
        for (row, count) in &rows {
            batch.put(old, row.as_bytes(), &postcard::to_stdvec(count).unwrap());
        }
        batch.put(old_markers, topic.as_bytes(), &postcard::to_stdvec(&meta.sinks[&topic]).unwrap());
    }
    batch.put(store.keyspace("checkpoint").unwrap(), b"meta", &postcard::to_stdvec(&meta).unwrap());
    store.commit(batch, true).unwrap();
    std::fs::write(dir.join("checkpoint.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
}

#[test]
fn a_view_state_of_the_layout_before_the_index_is_replaced_by_an_index_replayed_from_the_changelog() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (first, _) = first_stats_run(dir);
    rewrite_to_the_layout_before_the_index(dir, &["bid_stats"]);

    let two = second_stats_run(dir, &first);
    assert_eq!(two.records, 1500, "the view is not new: its reader resumes");
    assert!(two.dropped.is_empty(), "a layout change drops nothing the job declared: {:?}", two.dropped);
    let meta = published(dir);
    assert!(meta.states.contains("vidx.bid_stats") && !meta.states.contains("view.bid_stats"), "{:?}", meta.states);
    assert_eq!(state_entries(dir, "view.bid_stats"), 0, "the old state is deleted");
    let store = RocksStore::open(dir.join("state")).unwrap();
    let old_markers = store.keyspace("checkpoint.applied").unwrap();
    assert_eq!(store.get(old_markers, b"view.bid_stats").unwrap(), None, "and its marker");
}

#[test]
fn a_view_of_the_layout_before_the_index_dropped_in_the_upgrade_starts_over_empty_when_created_again() {
    // The startup replay builds an index for every view the directory has,
    // declared or not; a view the upgraded job drops takes it along, and a
    // later view of that name starts from nothing.
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let first = bids(0..1000);
    produce(dir, "bid", 2, &first);
    run(dir, StateBackend::RocksDb, BOTH);
    rewrite_to_the_layout_before_the_index(dir, &["bid_stats", "bid_max"]);
    let two = run_dropping(dir, StateBackend::RocksDb, STATS_ONLY);
    assert!(two.dropped.contains(&"view bid_max".to_owned()), "{:?}", two.dropped);
    assert_eq!(state_entries(dir, "vidx.bid_max"), 0, "the replayed index went with the view");
    assert_eq!(state_entries(dir, "view.bid_max"), 0);
    // Were anything left in its index (a hash key and a row), the new view
    // must not see it.
    {
        let store = RocksStore::open(dir.join("state")).unwrap();
        let index = store.keyspace("vidx.bid_max").unwrap();
        let mut batch = millpond_dataflow::state::WriteBatch::new();
        batch.put(index, b"", &[7; 16]);
        batch.put(index, &[9; 16], &[[0, 0, 0, 0, 0, 0, 0, 5], [0, 0, 0, 0, 0, 0, 0x10, 0]].concat());
        store.commit(batch, true).unwrap();
    }

    let second = bids(1000..1400);
    produce(dir, "bid", 2, &second);
    run(dir, StateBackend::RocksDb, BOTH);
    let all: Input = first.into_iter().chain(second).collect();
    assert_eq!(view_rows(dir, "bid_max"), expected_max(&all), "a new changelog, read as the recomputation");
    assert_eq!(state_rows(dir, "bid_max"), expected_max(&all));
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&all));
}

#[test]
fn a_view_that_cannot_be_caught_up_is_refused_while_declared_and_can_still_be_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let input = bids(0..1000);
    produce(dir, "bid", 2, &input);
    run(dir, StateBackend::RocksDb, BOTH);
    // `bid_max`'s state apply was lost, and so is its changelog.
    lose_view_state(dir, "bid_max", false);
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    log.delete_topic("view.bid_max").unwrap();
    log.close().unwrap();

    let refused = refusal(Runtime::run(config(dir, StateBackend::RocksDb), |job| build(job, BOTH)));
    assert!(refused.contains("view 'bid_max': its state could not be caught up"), "{refused}");
    assert!(refused.contains("view.bid_max"), "names the changelog: {refused}");
    // A job that drops it still starts, and the other view goes on.
    let stats = run_dropping(dir, StateBackend::RocksDb, STATS_ONLY);
    assert!(stats.dropped.contains(&"view bid_max".to_owned()), "{:?}", stats.dropped);
    assert_eq!(view_names(dir), ["bid_stats"]);
    assert_eq!(view_rows(dir, "bid_stats"), expected_stats(&input));
    assert_eq!(applied_marker(dir, "view.bid_max"), None, "the drop took the marker");
}
