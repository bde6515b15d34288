//! What an epoch costs in state reads: a keyed operator reads what changed
//! (and, for a join, the other side's rows of a key only when it must emit
//! them), never the whole stored multiset of a key it touches. Counted in
//! the runtime's state reads (`RunStats::state_reads`), not in time.
//!
//! And a join whose state is in the layout before per-row entries (one
//! multiset per side and key) is rewritten when it is built, and goes on
//! to give the same answer as a recomputation.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{Extremes, produce, rows_of, state_entries, view_rows};
use millpond_dataflow::state::{RocksStore, StateStore, WriteBatch};
use millpond_dataflow::{
    Collection, Count, Job, Max, Min, Multiplicity, OrderKey, RunStats, Runtime, RuntimeConfig, StateBackend, Sum, json,
};
use serde::Deserialize;

/// One input row: key `k`, value `v`.
#[derive(Clone, Debug, Deserialize)]
struct Row {
    k: u8,
    v: i64,
}

type Rows = Vec<(u8, i64)>;

fn records(rows: &[(u8, i64)]) -> Vec<(Option<String>, Option<String>)> {
    rows.iter().map(|(k, v)| (Some(k.to_string()), Some(format!(r#"{{"k":{k},"v":{v}}}"#)))).collect()
}

fn build(job: &mut Job<'_>) {
    let left = job.source("left", json::<Row>()).map(|r: Row| (r.k, r.v));
    let right = job.source("right", json::<Row>()).map(|r: Row| (r.k, r.v));
    job.materialize("join", left.clone().join("op_join", right.clone()));
    job.materialize("left_join", left.left_join("op_left_join", right));
}

fn run(dir: &Path) -> RunStats {
    let config = RuntimeConfig::new(dir).epoch_interval_ms(20).state(StateBackend::RocksDb).stop_when_caught_up(true);
    Runtime::run(config, build).unwrap()
}

/// The inner and the left outer join of `left` and `right`, as view rows.
fn expected(left: &Rows, right: &Rows) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let mut inner = Vec::new();
    let mut outer = Vec::new();
    for &(k, v) in left {
        let matches: Vec<i64> = right.iter().filter(|(rk, _)| *rk == k).map(|(_, w)| *w).collect();
        inner.extend(matches.iter().map(|&w| ((k, (v, w)), 1)));
        if matches.is_empty() {
            outer.push(((k, (v, None)), 1));
        }
        outer.extend(matches.iter().map(|&w| ((k, (v, Some(w))), 1)));
    }
    (rows_of(inner), rows_of(outer))
}

fn produce_both(dir: &Path, left: &Rows, right: &Rows) {
    produce(dir, "left", 2, &records(left));
    produce(dir, "right", 2, &records(right));
}

/// Key 0 holds 100 K right rows and key 1 100 K left rows; then a few rows
/// arrive on the other side of each. The second run reads a few dozen
/// entries of a few bytes, where one multiset per side and key would have
/// read (and rewritten) both 100 K-row multisets.
#[test]
fn a_hot_join_key_costs_per_epoch_what_changed_not_what_it_holds() {
    const HELD: i64 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let mut left: Rows = (0..HELD).map(|v| (1, v)).collect();
    left.push((0, -1));
    let mut right: Rows = (0..HELD).map(|v| (0, v)).collect();
    right.push((1, -1));
    produce_both(dir.path(), &left, &right);
    let first = run(dir.path());
    assert_eq!(first.records, 2 * HELD as u64 + 2);

    let (more_left, more_right): (Rows, Rows) =
        ((0..10).map(|v| (1, HELD + v)).collect(), (0..10).map(|v| (0, HELD + v)).collect());
    produce_both(dir.path(), &more_left, &more_right);
    let second = run(dir.path());
    assert_eq!(second.records, 20);
    let reads = second.state_reads;
    // Per key: its right total, the other side's one row, ten point reads of
    // new rows; then the views' reads of their 20 new rows each.
    assert!(reads.entries <= 16, "range reads visited {} entries: {reads:?}", reads.entries);
    assert!(reads.gets <= 200, "{} point reads: {reads:?}", reads.gets);
    assert!(reads.value_bytes <= 4096, "{} bytes of state read: {reads:?}", reads.value_bytes);

    left.extend(more_left);
    right.extend(more_right);
    let (inner, outer) = expected(&left, &right);
    assert_eq!(inner.len(), 2 * (HELD as usize + 10));
    assert_eq!(view_rows(dir.path(), "join"), inner);
    assert_eq!(view_rows(dir.path(), "left_join"), outer);
}

/// A join's head entry (docs/state.md, join layout 2), as stored.
#[derive(Deserialize)]
enum Head {
    Inline(Vec<(i64, i64)>),
    Spilled { rows: u64, total: i64 },
}

/// Rewrites a join's state (tag, the `u8` key, ...) back into the layout
/// before layout 2: one sorted multiset per side and key (tags 0 and 1),
/// from its heads (tags 2 and 3) and spilled rows (tags 4 and 5).
fn to_layout_1(store: &RocksStore, keyspace_name: &str) {
    let keyspace = store.keyspace(keyspace_name).unwrap();
    let mut multisets: BTreeMap<(u8, u8), Vec<(i64, i64)>> = BTreeMap::new();
    let mut batch = WriteBatch::new();
    store
        .scan_prefix(keyspace, &[], &mut |key, value| {
            let side = multisets.entry(((key[0] - 2) % 2, key[1])).or_default();
            match (key[0], postcard::from_bytes::<Head>(value)) {
                (2 | 3, Ok(Head::Inline(rows))) => side.extend(rows),
                (2 | 3, Ok(Head::Spilled { rows, total })) => {
                    assert!(rows > 0, "a spilled head of total {total} has rows")
                }
                (4 | 5, _) => {
                    side.push((postcard::from_bytes(&key[2..]).unwrap(), postcard::from_bytes(value).unwrap()))
                }
                (tag, head) => panic!("a join's state has no tag {tag} (head: {:?})", head.is_ok()),
            }
            batch.delete(keyspace, key);
            true
        })
        .unwrap();
    assert!(!multisets.is_empty(), "{keyspace_name} holds rows");
    for ((tag, key), mut multiset) in multisets {
        multiset.sort();
        batch.put(keyspace, &[tag, key], &postcard::to_stdvec(&multiset).unwrap());
    }
    store.commit(batch, true).unwrap();
}

fn tags(store: &RocksStore, keyspace_name: &str) -> Vec<u8> {
    let keyspace = store.keyspace(keyspace_name).unwrap();
    let mut tags = Vec::new();
    store
        .scan_prefix(keyspace, &[], &mut |key, _| {
            tags.push(key[0]);
            true
        })
        .unwrap();
    tags.dedup();
    tags
}

#[test]
fn a_join_in_the_layout_before_row_entries_is_rewritten_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut left: Rows = (0..60).map(|i| ((i % 5) as u8, i)).collect();
    let mut right: Rows = (0..40).map(|i| ((i % 7) as u8, i)).filter(|(k, _)| *k != 3).collect();
    // Duplicates: a multiplicity of 2.
    left.push((2, 7));
    right.push((4, 4));
    produce_both(dir.path(), &left, &right);
    run(dir.path());
    {
        let store = RocksStore::open(dir.path().join("state")).unwrap();
        for name in ["op.op_join", "op.op_left_join"] {
            to_layout_1(&store, name);
            assert_eq!(tags(&store, name), [0, 1]);
        }
    }
    // Key 3 gets its first right rows: unmatched left rows become matched.
    let (more_left, more_right): (Rows, Rows) =
        (vec![(3, 100), (6, 101), (0, 102)], vec![(3, 200), (0, 201), (5, 202)]);
    produce_both(dir.path(), &more_left, &more_right);
    run(dir.path());
    let store = RocksStore::open(dir.path().join("state")).unwrap();
    assert_eq!(tags(&store, "op.op_join"), [2, 3]);
    assert_eq!(tags(&store, "op.op_left_join"), [2, 3]);
    drop(store);
    left.extend(more_left);
    right.extend(more_right);
    let (inner, outer) = expected(&left, &right);
    assert_eq!(view_rows(dir.path(), "join"), inner);
    assert_eq!(view_rows(dir.path(), "left_join"), outer);
}

/// A change: `d` copies of row `v` under key `k` (negative: retracted).
#[derive(Clone, Debug, Deserialize)]
struct Change {
    k: u8,
    v: i64,
    d: i64,
}

/// Multiplicities per `(key, row)`.
type Counts = BTreeMap<(u8, i64), i64>;

fn build_changes(job: &mut Job<'_>) {
    let changes = |c: Change| Some(((c.k, c.v), c.d as millpond_dataflow::Diff));
    let left = job.source("left", json::<Change>()).explode(changes);
    let right = job.source("right", json::<Change>()).explode(changes);
    job.materialize("join", left.clone().join("op_join", right.clone()));
    job.materialize("left_join", left.left_join("op_left_join", right));
}

fn produce_changes(dir: &Path, topic: &str, changes: &[(u8, i64, i64)], counts: &mut Counts) {
    let records: Vec<_> = changes
        .iter()
        .map(|(k, v, d)| (Some(format!("{k}:{v}")), Some(format!(r#"{{"k":{k},"v":{v},"d":{d}}}"#))))
        .collect();
    produce(dir, topic, 2, &records);
    for &(k, v, d) in changes {
        *counts.entry((k, v)).or_insert(0) += d;
    }
    counts.retain(|_, c| *c != 0);
}

fn check_joins(dir: &Path, left: &Counts, right: &Counts) {
    let config = RuntimeConfig::new(dir).epoch_interval_ms(20).state(StateBackend::RocksDb).stop_when_caught_up(true);
    Runtime::run(config, build_changes).unwrap();
    let (mut inner, mut outer) = (Vec::new(), Vec::new());
    for (&(k, v), &c) in left {
        let matches: Vec<(i64, i64)> = right.range((k, i64::MIN)..=(k, i64::MAX)).map(|(&(_, w), &n)| (w, n)).collect();
        inner.extend(matches.iter().map(|&(w, n)| ((k, (v, w)), c * n)));
        outer.extend(matches.iter().map(|&(w, n)| ((k, (v, Some(w))), c * n)));
        if matches.is_empty() {
            outer.push(((k, (v, None)), c));
        }
    }
    assert_eq!(view_rows(dir, "join"), rows_of(inner));
    assert_eq!(view_rows(dir, "left_join"), rows_of(outer));
}

/// Keys whose multisets spill (2 000 rows, far past the inline cap) are
/// retracted down to a few rows, to empty, and filled again; the joins
/// match a recomputation after every run, and an emptied key leaves no
/// state behind.
#[test]
fn a_spilled_key_follows_retractions_down_to_empty_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let (mut left, mut right) = (Counts::new(), Counts::new());
    let mut big_left: Vec<(u8, i64, i64)> = (0..2_000).map(|v| (0, v, 1)).collect();
    big_left.extend((0..100).map(|v| (0, v, 1))); // multiplicity 2
    big_left.extend([(1, 5, 1), (1, 6, 2)]);
    let mut big_right: Vec<(u8, i64, i64)> = (0..2_000).map(|v| (1, v, 1)).collect();
    big_right.extend([(0, 1, 1), (0, 2, 1), (0, 3, 1)]);
    produce_changes(dir.path(), "left", &big_left, &mut left);
    produce_changes(dir.path(), "right", &big_right, &mut right);
    check_joins(dir.path(), &left, &right);

    // Left key 0 down to 10 rows (some once of twice); right key 1 empty:
    // key 1's left rows become unmatched.
    let mut shrink: Vec<(u8, i64, i64)> = (10..2_000).map(|v| (0, v, -1)).collect();
    shrink.extend((0..50).map(|v| (0, v, -1)));
    produce_changes(dir.path(), "left", &shrink, &mut left);
    let empty: Vec<(u8, i64, i64)> = (0..2_000).map(|v| (1, v, -1)).collect();
    produce_changes(dir.path(), "right", &empty, &mut right);
    check_joins(dir.path(), &left, &right);

    // Left key 0 empty; right key 1 spills again.
    let rest: Vec<(u8, i64, i64)> = left.iter().filter(|((k, _), _)| *k == 0).map(|(&(k, v), &c)| (k, v, -c)).collect();
    produce_changes(dir.path(), "left", &rest, &mut left);
    let refill: Vec<(u8, i64, i64)> = (0..1_500).map(|v| (1, v * 7, 1)).collect();
    produce_changes(dir.path(), "right", &refill, &mut right);
    check_joins(dir.path(), &left, &right);

    // Left key 0 (`[2, 0, ...]`, `[4, 0, ...]`) holds nothing.
    let store = RocksStore::open(dir.path().join("state")).unwrap();
    for name in ["op.op_join", "op.op_left_join"] {
        let keyspace = store.keyspace(name).unwrap();
        for prefix in [[2u8, 0], [4, 0]] {
            let mut entries = 0;
            store
                .scan_prefix(keyspace, &prefix, &mut |_, _| {
                    entries += 1;
                    true
                })
                .unwrap();
            assert_eq!(entries, 0, "{name}: key 0's left side under tag {} is empty", prefix[0]);
        }
    }
}

/// The top-k views of `build_top_k`, recomputed: per key, the `k`
/// greatest (or least) rows, counting multiplicities.
fn top_k_of(counts: &Counts, k: i64, greatest: bool) -> BTreeMap<String, i64> {
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<u8> = counts.keys().map(|(key, _)| *key).collect();
    for key in keys {
        let mut rows: Vec<(i64, i64)> = counts
            .range((key, i64::MIN)..=(key, i64::MAX))
            .map(|(&(_, v), &c)| (v, c))
            .filter(|(_, c)| *c > 0)
            .collect();
        if greatest {
            rows.reverse();
        }
        let mut left = k;
        for (v, c) in rows {
            if left == 0 {
                break;
            }
            let take = c.min(left);
            out.push(((key, v), take));
            left -= take;
        }
    }
    rows_of(out)
}

fn build_top_k(job: &mut Job<'_>) {
    let changes = |c: Change| Some(((c.k, c.v), c.d as millpond_dataflow::Diff));
    let rows = job.source("left", json::<Change>()).explode(changes);
    job.materialize("top3", rows.clone().top_k("op_top3", 3));
    let least = rows.map(|(k, v)| (k, std::cmp::Reverse(v))).top_k("op_least5", 5);
    job.materialize("least5", least.map(|(k, v)| (k, v.0)));
}

fn check_top_k(dir: &Path, counts: &Counts) -> RunStats {
    let config = RuntimeConfig::new(dir).epoch_interval_ms(20).state(StateBackend::RocksDb).stop_when_caught_up(true);
    let stats = Runtime::run(config, build_top_k).unwrap();
    assert_eq!(view_rows(dir, "top3"), top_k_of(counts, 3, true));
    assert_eq!(view_rows(dir, "least5"), top_k_of(counts, 5, false));
    stats
}

/// Key 0 holds 100 K rows; then ten rows arrive that enter neither top-k,
/// and one that enters the top 3. The second run reads the first rows of
/// the key and the changed rows: tens of entries, where the multiset of a
/// `reduce` would have read and rewritten all 100 K rows.
#[test]
fn a_hot_top_k_key_costs_per_epoch_its_first_rows_and_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut counts = Counts::new();
    fill_hot_key(dir.path(), &mut counts, check_top_k);

    let mut more: Vec<(u8, i64, i64)> = (0..10).map(|v| (0, 1_001 + v * 2, 1)).collect();
    more.push((0, 200_001, 1));
    produce_changes(dir.path(), "left", &more, &mut counts);
    // Per operator: the head, up to 5 first rows before and after, 11 point
    // reads of new rows; then the views' reads of their changed rows.
    assert_reads_at_most(check_top_k(dir.path(), &counts).state_reads, 40);
}

/// A spilled key loses its first rows (the top-k falls back to the next
/// ones), duplicates come and go, the key empties and fills again; the
/// views match a recomputation after every run, and an emptied key leaves
/// no state behind.
#[test]
fn a_spilled_top_k_key_falls_back_when_its_first_rows_are_retracted() {
    let dir = tempfile::tempdir().unwrap();
    let mut counts = Counts::new();
    fill_spilled_key(dir.path(), &mut counts, check_top_k);

    // The greatest and the least rows of key 0 go; ties at the boundary.
    let mut cut: Vec<(u8, i64, i64)> = (1_990..2_000).map(|v| (0, v, -1)).collect();
    cut.extend((0..4).map(|v| (0, v, -1)));
    cut.extend([(0, 1_999, -2), (0, 500, 3), (0, 1_989, 1), (1, 8, -1)]);
    produce_changes(dir.path(), "left", &cut, &mut counts);
    check_top_k(dir.path(), &counts);

    // Key 0 empties, key 1 spills.
    let rest: Vec<(u8, i64, i64)> =
        counts.iter().filter(|((k, _), _)| *k == 0).map(|(&(k, v), &c)| (k, v, -c)).collect();
    produce_changes(dir.path(), "left", &rest, &mut counts);
    let spill: Vec<(u8, i64, i64)> = (0..1_500).map(|v| (1, v * 7, 1)).collect();
    produce_changes(dir.path(), "left", &spill, &mut counts);
    check_top_k(dir.path(), &counts);

    // Key 1 spilled (head 0, rows 1); key 0 holds nothing.
    for name in ["topk.op_top3", "topk.op_least5"] {
        assert_eq!(tags_and_keys(dir.path(), name), [[0, 1], [1, 1]], "{name}");
    }
}

fn build_extremes(job: &mut Job<'_>) {
    let changes = |c: Change| Some(((c.k, c.v), c.d as millpond_dataflow::Diff));
    let rows = job.source("left", json::<Change>()).explode(changes);
    job.materialize("extremes", rows.aggregate_sets("op_extremes", Extremes));
}

fn check_extremes(dir: &Path, counts: &Counts) -> RunStats {
    let config = RuntimeConfig::new(dir).epoch_interval_ms(20).state(StateBackend::RocksDb).stop_when_caught_up(true);
    let stats = Runtime::run(config, build_extremes).unwrap();
    let mut expected = Vec::new();
    let keys: std::collections::BTreeSet<u8> = counts.keys().map(|(key, _)| *key).collect();
    for key in keys {
        let values: Vec<i64> = counts.range((key, i64::MIN)..=(key, i64::MAX)).map(|(&(_, v), _)| v).collect();
        expected.push(((key, (values[0], values[values.len() - 1], values.len() as u64)), 1));
    }
    assert_eq!(view_rows(dir, "extremes"), rows_of(expected));
    stats
}

/// Key 0 holds 100 K values; then its maximum is retracted, ten values
/// arrive between its extremes and one below its minimum. The second run
/// reads the key's head, one entry per changed value and the start of the
/// descending set once (its maximum went): tens of entries, where a
/// multiset in the accumulator would have read and rewritten 100 K values.
#[test]
fn a_hot_min_max_key_costs_per_epoch_what_changed() {
    hot_extremes_cost_what_changed(check_extremes);
}

/// Fills the hot key, changes its extremes and a few values, and checks
/// (with `check`) that the second run read at most 20 range entries.
fn hot_extremes_cost_what_changed(check: fn(&Path, &Counts) -> RunStats) {
    let dir = tempfile::tempdir().unwrap();
    let mut counts = Counts::new();
    fill_hot_key(dir.path(), &mut counts, check);

    let mut more: Vec<(u8, i64, i64)> = (0..10).map(|v| (0, 1_001 + v * 2, 1)).collect();
    more.extend([(0, 199_998, -1), (0, -7, 1)]);
    produce_changes(dir.path(), "left", &more, &mut counts);
    assert_reads_at_most(check(dir.path(), &counts).state_reads, 20);
}

/// A spilled key loses its extremes again and again (each falls back to
/// the next value), duplicates come and go, the key empties and another
/// spills; the view matches a recomputation after every run, and an
/// emptied key leaves no state behind.
#[test]
fn a_spilled_min_max_key_falls_back_when_its_extremes_are_retracted() {
    let dir = tempfile::tempdir().unwrap();
    let mut counts = Counts::new();
    fill_spilled_key(dir.path(), &mut counts, check_extremes);

    for round in 0..3 {
        let (low, high) = (round * 5, 1_999 - round * 5);
        let mut cut: Vec<(u8, i64, i64)> = Vec::new();
        for (&(k, v), &c) in counts.iter() {
            if k == 0 && (v < low + 5 || v > high - 5) {
                cut.push((k, v, -c));
            }
        }
        cut.extend([(0, 500 + round, 2), (1, 8, -1)]);
        produce_changes(dir.path(), "left", &cut, &mut counts);
        check_extremes(dir.path(), &counts);
    }

    let rest: Vec<(u8, i64, i64)> =
        counts.iter().filter(|((k, _), _)| *k == 0).map(|(&(k, v), &c)| (k, v, -c)).collect();
    produce_changes(dir.path(), "left", &rest, &mut counts);
    let spill: Vec<(u8, i64, i64)> = (0..1_500).map(|v| (1, v * 7, 1)).collect();
    produce_changes(dir.path(), "left", &spill, &mut counts);
    check_extremes(dir.path(), &counts);

    // Key 1 spilled (head 0, rows 1); key 0 holds nothing.
    assert_eq!(tags_and_keys(dir.path(), "sets.op_extremes"), [[0, 1], [1, 1]]);
}

/// The Rust API's `aggregate` with MIN and MAX over a change stream (it
/// may retract): the same sets as `aggregate_sets`, beside its count and sum.
fn build_rust_extremes(job: &mut Job<'_>) {
    let changes = |c: Change| Some(((c.k, c.v), c.d as millpond_dataflow::Diff));
    let rows = job.source("left", json::<Change>()).explode(changes);
    assert!(!rows.is_monotonic(), "a change stream may retract");
    let stats = (Count, Sum(|v: &i64| *v), Min(|v: &i64| *v), Max(|v: &i64| *v));
    job.materialize("stats", rows.aggregate("op_stats", stats));
}

fn check_rust_extremes(dir: &Path, counts: &Counts) -> RunStats {
    let config = RuntimeConfig::new(dir).epoch_interval_ms(20).state(StateBackend::RocksDb).stop_when_caught_up(true);
    let stats = Runtime::run(config, build_rust_extremes).unwrap();
    let mut per_key: BTreeMap<u8, (i64, i64, Option<i64>, Option<i64>)> = BTreeMap::new();
    for (&(k, v), &c) in counts.iter().filter(|(_, c)| **c != 0) {
        let (count, sum, min, max) = per_key.entry(k).or_default();
        *count += c;
        *sum += v * c;
        *min = Some(min.map_or(v, |m| m.min(v)));
        *max = Some(max.map_or(v, |m| m.max(v)));
    }
    assert_eq!(view_rows(dir, "stats"), rows_of(per_key.into_iter().map(|row| (row, 1))));
    stats
}

/// As [`a_hot_min_max_key_costs_per_epoch_what_changed`], through the
/// Rust API's `aggregate((Count, Sum, Min, Max))`: its MIN and MAX keep
/// their sets one entry per value, so the second run reads what changed,
/// not the key's 100 K values.
#[test]
fn a_hot_key_of_an_aggregate_with_min_and_max_costs_per_epoch_what_changed() {
    hot_extremes_cost_what_changed(check_rust_extremes);
}

/// The Rust API's MIN and MAX fall back to the next value as their
/// extremes are retracted, run after run, and an emptied key leaves no
/// state.
#[test]
fn an_aggregates_min_and_max_fall_back_when_their_extremes_are_retracted() {
    let dir = tempfile::tempdir().unwrap();
    let mut counts = Counts::new();
    fill_spilled_key(dir.path(), &mut counts, check_rust_extremes);
    for round in 0..3 {
        let cut: Vec<(u8, i64, i64)> = counts
            .iter()
            .filter(|((k, v), c)| *k == 0 && **c != 0 && (*v < round * 5 + 5 || *v > 1_994 - round * 5))
            .map(|(&(k, v), &c)| (k, v, -c))
            .collect();
        produce_changes(dir.path(), "left", &cut, &mut counts);
        check_rust_extremes(dir.path(), &counts);
    }
    let rest: Vec<(u8, i64, i64)> =
        counts.iter().filter(|((k, _), c)| *k == 0 && **c != 0).map(|(&(k, v), &c)| (k, v, -c)).collect();
    produce_changes(dir.path(), "left", &rest, &mut counts);
    check_rust_extremes(dir.path(), &counts);
    // Key 0 is gone; key 1 (two values) is one head entry.
    assert_eq!(tags_and_keys(dir.path(), "sets.op_stats"), [[0, 1]]);
}

/// Over a source's records (never a retraction), MIN and MAX keep only the
/// extremes: one entry per key, of a few bytes, however many values a key
/// has seen.
#[test]
fn an_aggregate_over_an_input_that_never_retracts_keeps_only_its_extremes() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<(u8, i64)> = (0..20_000).map(|v| (0, v * 3 % 20_011)).chain([(1, 5), (1, -2)]).collect();
    produce(dir.path(), "left", 2, &records(&rows));
    let build = |job: &mut Job<'_>| {
        let left = job.source("left", json::<Row>()).map(|r: Row| (r.k, r.v));
        assert!(left.is_monotonic(), "a source's records never retract");
        job.materialize("extremes", left.aggregate("op_extremes", (Count, Min(|v: &i64| *v), Max(|v: &i64| *v))));
    };
    let config =
        RuntimeConfig::new(dir.path()).epoch_interval_ms(5).state(StateBackend::RocksDb).stop_when_caught_up(true);
    Runtime::run(config, build).unwrap();
    let (low, high) = (rows[..20_000].iter().map(|r| r.1).min(), rows[..20_000].iter().map(|r| r.1).max());
    let want = rows_of([((0u8, (20_000i64, low, high)), 1), ((1u8, (2i64, Some(-2i64), Some(5i64))), 1)]);
    assert_eq!(view_rows(dir.path(), "extremes"), want);
    assert_eq!(state_entries(dir.path(), "extremes.op_extremes"), 2, "one entry per key");
    assert_eq!(state_entries(dir.path(), "sets.op_extremes"), 0, "no sets");
    let store = RocksStore::open(dir.path().join("state")).unwrap();
    let space = store.keyspace("extremes.op_extremes").unwrap();
    let mut bytes = 0;
    store
        .scan_prefix(space, b"", &mut |_, value| {
            bytes += value.len();
            true
        })
        .unwrap();
    assert!(bytes <= 2 * 32, "the extremes alone: {bytes} bytes for two keys");
}

fn highest_of<'s>(left: Collection<'s, (u8, i64)>) -> Collection<'s, (u8, Option<i64>)> {
    left.aggregate("op_highest", Max(|v: &i64| *v))
}

/// An aggregation with MIN or MAX whose input starts to retract after a
/// commit keeps its sets in a new state, fed by a new reader from the
/// start; changed back, it would resume its first state, which missed
/// what came in between: that is refused, naming both.
#[test]
fn an_aggregate_whose_input_changes_whether_it_retracts_and_back_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "left", 2, &records(&[(0, 1), (0, 5), (1, 2)]));
    let config = || RuntimeConfig::new(dir.path()).epoch_interval_ms(5).stop_when_caught_up(true);
    Runtime::run(config(), |job| {
        let left = job.source("left", json::<Row>()).map(|r: Row| (r.k, r.v));
        job.materialize("highest", highest_of(left));
    })
    .unwrap();
    let want = || rows_of([((0u8, Some(7i64)), 1), ((1u8, Some(2i64)), 1)]);
    produce(dir.path(), "left", 2, &records(&[(0, 7)]));
    Runtime::run(config(), |job| {
        let left = job.source_named("fresh", "left", json::<Row>()).explode(|r: Row| Some(((r.k, r.v), 1)));
        job.materialize_definition("highest", "retracting", highest_of(left));
    })
    .unwrap();
    assert_eq!(view_rows(dir.path(), "highest"), want(), "a new state, built from the start");

    produce(dir.path(), "left", 2, &records(&[(1, 9)]));
    let back = Runtime::run(config(), |job| {
        let left = job.source_named("fresh", "left", json::<Row>()).map(|r: Row| (r.k, r.v));
        job.materialize_definition("highest", "retracting", highest_of(left));
    });
    let message = back.expect_err("refused").to_string();
    assert!(message.contains("'extremes.op_highest'") && message.contains("'sets.op_highest'"), "{message}");
    assert_eq!(view_rows(dir.path(), "highest"), want(), "nothing committed");
}

/// Key 0 holds 100 K values (0, 2, 4, ...) and key 1 one value; checked.
fn fill_hot_key(dir: &Path, counts: &mut Counts, check: fn(&Path, &Counts) -> RunStats) {
    let held: Vec<(u8, i64, i64)> = (0..100_000).map(|v| (0, v * 2, 1)).chain([(1, 5, 1)]).collect();
    produce_changes(dir, "left", &held, counts);
    check(dir, counts);
}

/// Key 0 spills (2 000 values, some twice), key 1 holds two; checked.
fn fill_spilled_key(dir: &Path, counts: &mut Counts, check: fn(&Path, &Counts) -> RunStats) {
    let mut fill: Vec<(u8, i64, i64)> = (0..2_000).map(|v| (0, v, 1)).collect();
    fill.extend([(0, 1_999, 2), (0, 0, 1), (1, 7, 1), (1, 8, 3)]);
    produce_changes(dir, "left", &fill, counts);
    check(dir, counts);
}

/// A run's reads stay within `entries_max` range-read entries, 100 point
/// reads and 4 KiB of values.
fn assert_reads_at_most(reads: millpond_dataflow::StateReads, entries_max: u64) {
    assert!(reads.entries <= entries_max, "range reads visited {} entries: {reads:?}", reads.entries);
    assert!(reads.gets <= 100, "{} point reads: {reads:?}", reads.gets);
    assert!(reads.value_bytes <= 4096, "{} bytes of state read: {reads:?}", reads.value_bytes);
}

/// The distinct (tag, first key byte) pairs stored in keyspace `name`.
fn tags_and_keys(dir: &Path, name: &str) -> Vec<[u8; 2]> {
    let store = RocksStore::open(dir.join("state")).unwrap();
    let keyspace = store.keyspace(name).unwrap();
    let mut keys = std::collections::BTreeSet::new();
    store
        .scan_prefix(keyspace, &[], &mut |key, _| {
            keys.insert([key[0], key[1]]);
            true
        })
        .unwrap();
    keys.into_iter().collect()
}

/// A top-k over an input that only inserts keeps only each key's first
/// rows: 100 K inserted rows of one key (spilled within an epoch: each
/// greater than the last, so every epoch pushes the previous first rows
/// out) leave the key's first 25 rows in state, and the view matches a
/// recomputation.
#[test]
fn a_top_k_over_inserts_only_keeps_only_its_first_rows() {
    keeps_only_the_first_25_rows(|job| {
        let rows = job.source("left", json::<Row>()).map(|r: Row| (r.k, r.v));
        let greatest = |v: &i64, out: &mut Vec<u8>| std::cmp::Reverse(*v).order_key(out);
        let top = rows.top_k_by("op_top", 25, true, greatest, |_k, first: &[(i64, millpond_dataflow::Diff)], out| {
            out.extend(first.iter().cloned().take(25))
        });
        job.materialize("top25", top);
    });
}

/// The same through `top_k`, which is told nothing: its input, a source's
/// records, never retracts (`Collection::is_monotonic`), so it keeps only
/// each key's first rows too.
#[test]
fn a_top_k_over_a_source_keeps_only_its_first_rows() {
    keeps_only_the_first_25_rows(|job| {
        let rows = job.source("left", json::<Row>()).map(|r: Row| (r.k, r.v));
        assert!(rows.is_monotonic());
        job.materialize("top25", rows.top_k("op_top", 25));
    });
}

fn keeps_only_the_first_25_rows(build: fn(&mut Job<'_>)) {
    let dir = tempfile::tempdir().unwrap();
    let mut counts = Counts::new();
    for round in 0..4i64 {
        let rows: Vec<(u8, i64, i64)> =
            (0..25_000).map(|v| (0, round * 25_000 + v, 1)).chain([(1, round, 1)]).collect();
        produce(dir.path(), "left", 2, &records(&rows.iter().map(|(k, v, _)| (*k, *v)).collect::<Vec<_>>()));
        rows.iter().for_each(|(k, v, d)| *counts.entry((*k, *v)).or_insert(0) += d);
        let config =
            RuntimeConfig::new(dir.path()).epoch_interval_ms(20).state(StateBackend::RocksDb).stop_when_caught_up(true);
        Runtime::run(config, build).unwrap();
        assert_eq!(view_rows(dir.path(), "top25"), top_k_of(&counts, 25, true));
    }
    let store = RocksStore::open(dir.path().join("state")).unwrap();
    let keyspace = store.keyspace("topk.op_top").unwrap();
    let mut rows = 0;
    store
        .scan_prefix(keyspace, &[1], &mut |_, _| {
            rows += 1;
            true
        })
        .unwrap();
    assert_eq!(rows, 25, "a spilled key keeps its first 25 rows");
}

/// A top-k over an input that only inserts writes no row that an epoch
/// pushes past the first ones at once: 20 000 rows of one key in random
/// order, many per epoch, for a top-1 leave the key's one row inline in
/// its head (no row entries, none ever scanned), and the view matches a
/// recomputation.
#[test]
fn a_top_k_over_inserts_only_writes_no_row_its_epoch_pushes_out() {
    let dir = tempfile::tempdir().unwrap();
    let build = |job: &mut Job<'_>| {
        let rows = job.source("left", json::<Row>()).map(|r: Row| (r.k, r.v));
        let greatest = |v: &i64, out: &mut Vec<u8>| std::cmp::Reverse(*v).order_key(out);
        let top = rows.top_k_by("op_top", 1, true, greatest, |_k, first: &[(i64, millpond_dataflow::Diff)], out| {
            out.extend(first.iter().cloned().take(1))
        });
        job.materialize("top1", top);
    };
    // A permutation of 0..20 000 (7 919 is prime to it).
    let rows: Vec<(u8, i64)> = (0..20_000i64).map(|i| (0, i * 7_919 % 20_000)).collect();
    produce(dir.path(), "left", 2, &records(&rows));
    let config =
        RuntimeConfig::new(dir.path()).epoch_interval_ms(20).state(StateBackend::RocksDb).stop_when_caught_up(true);
    let stats = Runtime::run(config, build).unwrap();
    let counts: Counts = rows.iter().map(|(k, v)| ((*k, *v), 1)).collect();
    assert_eq!(view_rows(dir.path(), "top1"), top_k_of(&counts, 1, true));
    assert_eq!(tags_and_keys(dir.path(), "topk.op_top"), vec![[0, 0]], "only the key's head is stored");
    assert_eq!(stats.state_reads.entries, 0, "no row entry was ever scanned: {:?}", stats.state_reads);
}

/// A top-k as it was before top-k layout 1: a `reduce` of each key's whole
/// multiset, in keyspace `op.NAME`, with the same name.
fn build_top_k_as_reduce(job: &mut Job<'_>) {
    let changes = |c: Change| Some(((c.k, c.v), c.d as millpond_dataflow::Diff));
    let rows = job.source("left", json::<Change>()).explode(changes);
    let top3 = rows.reduce("op_top3", |_k: &u8, values: &[(i64, millpond_dataflow::Diff)], out| {
        let mut left = 3;
        for (value, count) in values.iter().rev().filter(|(_, c)| *c > 0) {
            let take = (*count).min(left);
            out.push((*value, take));
            left -= take;
            if left == 0 {
                break;
            }
        }
    });
    job.materialize("top3", top3);
}

fn build_top3(job: &mut Job<'_>) {
    let changes = |c: Change| Some(((c.k, c.v), c.d as millpond_dataflow::Diff));
    let rows = job.source("left", json::<Change>()).explode(changes);
    job.materialize("top3", rows.top_k("op_top3", 3));
}

/// A job whose top-k state is in the layout before (a `reduce`'s, keyspace
/// `op.NAME`) resumes with the top-k: the state is moved into the new
/// keyspace when the operator is built, the old keyspace is dropped, and
/// the view goes on to match a recomputation, with retractions that need
/// the moved rows.
#[test]
fn a_top_k_in_the_layout_before_is_moved_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        || RuntimeConfig::new(dir.path()).epoch_interval_ms(20).state(StateBackend::RocksDb).stop_when_caught_up(true);
    let mut counts = Counts::new();
    let mut fill: Vec<(u8, i64, i64)> = (0..2_000).map(|v| (0, v, 1)).collect();
    fill.extend([(0, 1_999, 2), (1, 7, 1), (1, 8, 3), (2, 5, 1)]);
    produce_changes(dir.path(), "left", &fill, &mut counts);
    Runtime::run(config(), build_top_k_as_reduce).unwrap();
    assert_eq!(view_rows(dir.path(), "top3"), top_k_of(&counts, 3, true));

    // The first rows of key 0 go: the moved rows below them come back.
    let cut: Vec<(u8, i64, i64)> = vec![(0, 1_999, -3), (0, 1_998, -1), (1, 8, -2), (2, 6, 1)];
    produce_changes(dir.path(), "left", &cut, &mut counts);
    Runtime::run(config(), build_top3).unwrap();
    assert_eq!(view_rows(dir.path(), "top3"), top_k_of(&counts, 3, true));
    let (moved, old) = (tags_and_keys(dir.path(), "topk.op_top3"), tags_and_keys(dir.path(), "op.op_top3"));
    assert!(moved.contains(&[0, 0]) && moved.contains(&[1, 0]), "key 0 spilled in the new layout: {moved:?}");
    assert!(old.is_empty(), "the layout before is gone: {old:?}");

    let more: Vec<(u8, i64, i64)> = vec![(0, 1_997, -1), (0, 5_000, 1), (1, 9, 1)];
    produce_changes(dir.path(), "left", &more, &mut counts);
    Runtime::run(config(), build_top3).unwrap();
    assert_eq!(view_rows(dir.path(), "top3"), top_k_of(&counts, 3, true));
}

/// `n` rows of distinct values, then rows of `n / 2` new values and of the
/// first `n / 2` values again.
fn new_then_half_again(n: i64) -> (Rows, Rows) {
    let row = |v: i64| ((v % 200) as u8, v);
    ((0..n).map(row).collect(), (n..n + n / 2).chain(0..n / 2).map(row).collect())
}

/// The job `build` over topic `pass`, to its end.
fn run_over_pass(dir: &Path, workers: usize, build: fn(&mut Job<'_>)) -> RunStats {
    let config = RuntimeConfig::new(dir)
        .epoch_interval_ms(20)
        .workers(workers)
        .state(StateBackend::RocksDb)
        .stop_when_caught_up(true);
    Runtime::run(config, build).unwrap()
}

/// A pass-through view of `pass` (key and value of every row).
fn run_pass_through(dir: &Path, workers: usize) -> RunStats {
    run_over_pass(dir, workers, |job| {
        let rows = job.source("pass", json::<Row>()).map(|r: Row| (r.k, r.v));
        job.materialize("pass", rows);
    })
}

/// A view that keeps adding rows (every change a row it never held) reads
/// no state for them: its fold's filter of the rows held says they are
/// absent. Resumed, the filter is first filled from the committed rows, so
/// only rows held before (here: repeated ones) are read, and counted right.
#[test]
fn a_view_reads_no_state_for_rows_it_never_held() {
    const ROWS: i64 = 20_000;
    for workers in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = new_then_half_again(ROWS);
        produce(dir.path(), "pass", 2, &records(&first));
        let reads = run_pass_through(dir.path(), workers).state_reads;
        assert!(reads.gets <= ROWS as u64 / 50, "{workers} worker(s): {} point reads for {ROWS} new rows", reads.gets);

        // Half new rows, half the first run's again (held once: now twice).
        produce(dir.path(), "pass", 2, &records(&second));
        let reads = run_pass_through(dir.path(), workers).state_reads;
        let repeated = (ROWS / 2) as u64;
        assert!(reads.filter_keys >= ROWS as u64, "the committed rows are scanned into the filter: {reads:?}");
        assert!(
            reads.gets >= repeated && reads.gets <= repeated + ROWS as u64 / 50,
            "{workers} worker(s): {} point reads for {repeated} rows held before and {repeated} new ones",
            reads.gets
        );
        let all = first.iter().chain(&second).map(|&row| (row, 1));
        assert_eq!(view_rows(dir.path(), "pass"), rows_of(all));
    }
}

/// A count per value of `pass` (each value its own key).
fn run_count_per_value(dir: &Path, workers: usize) -> RunStats {
    run_over_pass(dir, workers, |job| count_per_value(job, Multiplicity::Any))
}

/// [`run_count_per_value`] with the view's promise that it holds each row
/// at most once (an aggregate's rows with their keys).
fn run_count_per_value_at_most_once(dir: &Path, workers: usize) -> RunStats {
    run_over_pass(dir, workers, |job| count_per_value(job, Multiplicity::AtMostOnce))
}

fn count_per_value(job: &mut Job<'_>, multiplicity: Multiplicity) {
    let keyed = job.source("pass", json::<Row>()).map(|r: Row| (r.v, ()));
    let counts = keyed.aggregate("op_counts", millpond_dataflow::Count);
    job.materialize_view("counts", "", multiplicity, counts);
}

/// A view that holds each row at most once reads nothing to retract a
/// row (it was held once): resumed over keys held before, only the
/// aggregate reads them, where a view of any multiplicity reads each
/// retracted count again (`an_operator_reads_no_state_for_keys_it_never_held`).
#[test]
fn a_view_that_holds_rows_at_most_once_reads_nothing_to_retract_them() {
    const KEYS: i64 = 20_000;
    for workers in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = new_then_half_again(KEYS);
        produce(dir.path(), "pass", 2, &records(&first));
        run_count_per_value_at_most_once(dir.path(), workers);

        // The second rows: half new keys, half the first run's again (count 1, now 2).
        produce(dir.path(), "pass", 2, &records(&second));
        let reads = run_count_per_value_at_most_once(dir.path(), 3 - workers).state_reads;
        let repeated = (KEYS / 2) as u64;
        assert!(
            reads.gets >= repeated && reads.gets <= repeated + KEYS as u64 / 25,
            "{workers} then {} worker(s): {} point reads for {repeated} keys held before (the aggregate's \
             reads only) and {repeated} new ones",
            3 - workers,
            reads.gets
        );
        let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
        first.iter().chain(&second).for_each(|&(_, v)| *counts.entry(v).or_default() += 1);
        assert_eq!(view_rows(dir.path(), "counts"), rows_of(counts.into_iter().map(|row| (row, 1))));
    }
}

/// [`run_count_per_value`] with a view unique by construction.
fn run_count_per_value_unique(dir: &Path, workers: usize) -> RunStats {
    run_over_pass(dir, workers, |job| count_per_value(job, Multiplicity::Unique))
}

/// A view unique by construction reads nothing and writes no entry per
/// row: resumed over keys held before, the aggregate alone reads them
/// (once each), and the view's index holds only its head, with 2 x KEYS
/// rows in the view.
#[test]
fn a_view_unique_by_construction_reads_nothing_and_indexes_no_row() {
    const KEYS: i64 = 20_000;
    for workers in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = new_then_half_again(KEYS);
        produce(dir.path(), "pass", 2, &records(&first));
        let reads = run_count_per_value_unique(dir.path(), workers).state_reads;
        assert!(reads.gets <= KEYS as u64 / 25, "{} point reads for {KEYS} new keys", reads.gets);
        assert_eq!(state_entries(dir.path(), "vidx.counts"), 1, "only the index's head");

        produce(dir.path(), "pass", 2, &records(&second));
        let reads = run_count_per_value_unique(dir.path(), 3 - workers).state_reads;
        let repeated = (KEYS / 2) as u64;
        assert!(
            reads.gets >= repeated && reads.gets <= repeated + KEYS as u64 / 25,
            "{} point reads for {repeated} keys held before (the aggregate's only) and {repeated} new ones",
            reads.gets
        );
        // Each worker scans the aggregate's KEYS keys into its filter; the
        // view has no rows to scan (an index of rows would double it).
        let scanned_max = (3 - workers) as u64 * KEYS as u64;
        assert!(reads.filter_keys <= scanned_max, "{} keys scanned into filters", reads.filter_keys);
        assert_eq!(state_entries(dir.path(), "vidx.counts"), 1, "only the index's head");
        let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
        first.iter().chain(&second).for_each(|&(_, v)| *counts.entry(v).or_default() += 1);
        assert_eq!(view_rows(dir.path(), "counts"), rows_of(counts.into_iter().map(|row| (row, 1))));
    }
}

/// A view that was `Unique` and is declared with another multiplicity under
/// the same definition (a job's change, not a replacement) reads its index
/// again: the index is first replayed from the changelog, and the counts
/// stay right.
#[test]
fn a_view_no_longer_unique_under_its_definition_indexes_its_rows_first() {
    const KEYS: i64 = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = new_then_half_again(KEYS);
    produce(dir.path(), "pass", 2, &records(&first));
    run_count_per_value_unique(dir.path(), 1);
    assert_eq!(state_entries(dir.path(), "vidx.counts"), 1, "only the index's head");
    produce(dir.path(), "pass", 2, &records(&second));
    run_count_per_value(dir.path(), 2);
    assert_eq!(state_entries(dir.path(), "vidx.counts"), 1 + KEYS as usize + KEYS as usize / 2, "a row entry each");
    let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
    first.iter().chain(&second).for_each(|&(_, v)| *counts.entry(v).or_default() += 1);
    assert_eq!(view_rows(dir.path(), "counts"), rows_of(counts.into_iter().map(|row| (row, 1))));
}

/// A view unique by construction whose rows break it within one epoch (a
/// row twice) fails the job naming the row; across epochs it is not seen
/// (nothing is read), which is why only what guarantees it may say so.
#[test]
fn a_view_unique_by_construction_that_holds_a_row_twice_in_an_epoch_fails_the_job() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "pass", 1, &records(&[(1, 10), (1, 10)]));
    let config = RuntimeConfig::new(dir.path()).state(StateBackend::RocksDb).stop_when_caught_up(true);
    let error = Runtime::run(config, |job| {
        let rows = job.source("pass", json::<Row>()).map(|r: Row| (r.k, r.v));
        job.materialize_view("pass", "", Multiplicity::Unique, rows);
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("view 'pass' holds each row at most once") && error.contains(r#"[1,10]"#), "{error}");
}

/// A pass-through view that promises to hold each row at most once, and
/// breaks the promise: a row twice in one epoch, or inserted again in a
/// later run, fails the job with an error naming the view and the row.
#[test]
fn a_view_that_breaks_its_at_most_once_promise_fails_the_job() {
    let build = |job: &mut Job<'_>| {
        let rows = job.source("pass", json::<Row>()).map(|r: Row| (r.k, r.v));
        job.materialize_view("pass", "", Multiplicity::AtMostOnce, rows);
    };
    let config = |dir: &Path| {
        RuntimeConfig::new(dir).epoch_interval_ms(20).state(StateBackend::RocksDb).stop_when_caught_up(true)
    };
    let twice = tempfile::tempdir().unwrap();
    produce(twice.path(), "pass", 1, &records(&[(1, 10), (1, 10)]));
    let error = Runtime::run(config(twice.path()), build).unwrap_err().to_string();
    assert!(error.contains("view 'pass' holds each row at most once") && error.contains(r#"[1,10]"#), "{error}");

    let again = tempfile::tempdir().unwrap();
    produce(again.path(), "pass", 1, &records(&[(1, 10), (2, 20)]));
    Runtime::run(config(again.path()), build).unwrap();
    assert_eq!(view_rows(again.path(), "pass"), rows_of([((1, 10), 1), ((2, 20), 1)]));
    produce(again.path(), "pass", 1, &records(&[(2, 20)]));
    let error = Runtime::run(config(again.path()), build).unwrap_err().to_string();
    assert!(error.contains("would go from 1 to 2 copies") && error.contains(r#"[2,20]"#), "{error}");
}

/// An aggregate over keys it never held reads no state for them: its
/// state's filter of the keys held says they are absent (and the view's
/// fold says the same of its new rows). Resumed, the filter is filled
/// from the committed keys first, so only the keys held before are read:
/// once by the aggregate, once by the view to retract the old count,
/// whichever worker count committed them.
#[test]
fn an_operator_reads_no_state_for_keys_it_never_held() {
    const KEYS: i64 = 20_000;
    for workers in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = new_then_half_again(KEYS);
        produce(dir.path(), "pass", 2, &records(&first));
        let reads = run_count_per_value(dir.path(), workers).state_reads;
        assert!(reads.gets <= KEYS as u64 / 25, "{workers} worker(s): {} point reads for {KEYS} new keys", reads.gets);

        // Half new keys, half the first run's again (count 1, now 2), with
        // the other worker count: each worker's filter must cover the keys
        // every worker of the first run committed.
        produce(dir.path(), "pass", 2, &records(&second));
        let reads = run_count_per_value(dir.path(), 3 - workers).state_reads;
        let repeated = (KEYS / 2) as u64;
        assert!(reads.filter_keys >= 2 * KEYS as u64, "the operator's keys and the view's rows are scanned: {reads:?}");
        assert!(
            reads.gets >= 2 * repeated && reads.gets <= 2 * repeated + KEYS as u64 / 25,
            "{workers} then {} worker(s): {} point reads for {repeated} keys held before and {repeated} new ones",
            3 - workers,
            reads.gets
        );
        let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
        first.iter().chain(&second).for_each(|&(_, v)| *counts.entry(v).or_default() += 1);
        assert_eq!(view_rows(dir.path(), "counts"), rows_of(counts.into_iter().map(|row| (row, 1))));
    }
}
