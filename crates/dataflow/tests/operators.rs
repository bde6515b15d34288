//! Every keyed operator against a from-scratch recomputation, with
//! retractions.
//!
//! The input is change streams: records `{"k":K,"v":V,"d":D}` read with
//! `explode` into `((k, v), d)`. Sequences are random, but the running
//! multiset of each `(k, v)` never goes negative, and each `(k, v)`'s
//! changes go to one partition (the record key is `"k:v"`), so every prefix
//! the runtime can see is a proper multiset. Changes are produced in many
//! small batches over several partitions and read with 1 ms epochs, small
//! fetches and a slow decoder (150 µs a record; a source stamps each fetch
//! with the epoch it is read in), so a retraction usually lands in a later
//! epoch than its insertion. The tests record the epoch of every input
//! change and check that this did happen; in the step-by-step and two-part
//! tests it always does (in a later run).
//!
//! One job materializes a view per operator; each view is compared with
//! the same function computed in plain Rust from the final input. The last
//! test feeds `aggregate` a difference of two streams (`concat`/`negate`),
//! whose multiplicities may be negative for a while.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Extremes, produce_batches, rows_of, view_rows};
use millpond_dataflow::{
    Avg, Count, Diff, Epoch, Fold, Job, Max, Min, RunStats, Runtime, RuntimeConfig, StateBackend, Sum, json, read_view,
};
use millpond_log::RecordView;
use proptest::prelude::*;
use serde::Deserialize;

const LEFT: &str = "left";
const RIGHT: &str = "right";
const TABLE: &str = "table";

/// One change of a change stream.
#[derive(Clone, Debug, Deserialize)]
struct Change {
    k: u8,
    v: i64,
    d: Diff,
}

/// A change to produce: `(k, v, d)`.
type Delta = (u8, i64, i64);
/// A record to produce: `(key, value)`.
type Produced = (Option<String>, Option<String>);
/// Final multiplicities per key and value (all positive).
type Multiset = BTreeMap<u8, BTreeMap<i64, i64>>;
/// Expected rows of every view.
type Views = BTreeMap<&'static str, BTreeMap<String, i64>>;

// ---------------------------------------------------------------------------
// The job.

fn decode_key(bytes: &[u8]) -> Result<u8, String> {
    std::str::from_utf8(bytes).map_err(|e| e.to_string())?.parse().map_err(|e| format!("bad key: {e}"))
}

fn decode_value(bytes: &[u8]) -> Result<i64, String> {
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

/// The fold's update: the sum of squares and the number of even values.
fn fold_update(state: &mut (i64, i64), v: &i64, d: Diff) {
    state.0 += v * v * d as i64;
    if v % 2 == 0 {
        state.1 += d as i64;
    }
}

/// The reduction: per residue of `v` mod 3, its number of values (as the
/// multiplicity of `(0, residue)`), and the number of distinct values as `(1, n)`.
fn reduce_logic(_key: &u8, values: &[(i64, Diff)], out: &mut Vec<((u8, i64), Diff)>) {
    for (v, count) in values {
        out.push(((0, v.rem_euclid(3)), *count));
    }
    out.push(((1, values.len() as i64), 1));
}

/// How long decoding one record takes: a slow source, so that reading the
/// input takes many 1 ms epochs (a source stamps each fetch with the epoch
/// it is read in).
const DECODE_MICROS: u64 = 150;

fn slow_json(record: &RecordView<'_>) -> Result<Change, String> {
    std::thread::sleep(Duration::from_micros(DECODE_MICROS));
    json::<Change>()(record)
}

fn slow_decode_key(bytes: &[u8]) -> Result<u8, String> {
    std::thread::sleep(Duration::from_micros(DECODE_MICROS));
    decode_key(bytes)
}

/// The epoch at which each change of the left stream entered the dataflow.
type Seen = Arc<Mutex<Vec<((u8, i64), Epoch, Diff)>>>;

fn build(job: &mut Job<'_>, seen: &Seen) {
    let seen = seen.clone();
    let changes = job.source(LEFT, slow_json);
    // A source's records never retract: MIN and MAX keep only the extremes.
    let inserts = changes.clone().filter(|c| c.d > 0).map(|c| (c.k, c.v));
    let left =
        changes.explode(|c: Change| Some(((c.k, c.v), c.d))).inspect(move |update| seen.lock().unwrap().push(*update));
    let right = job.source(RIGHT, slow_json).explode(|c: Change| Some(((c.k, c.v), c.d)));
    let table = job.upsert_source("op_table", TABLE, slow_decode_key, decode_value);

    let stats = left.clone().aggregate("op_stats", (Count, Sum(|v: &i64| *v), Min(|v: &i64| *v), Max(|v: &i64| *v)));
    job.materialize("stats", stats);
    // Each value spread over SPREAD items, so a key's sets outgrow their
    // inline encoding and spill into one entry per item.
    let spread = left.clone().flat_map(|(k, v)| (0..SPREAD).map(move |i| (k, v * SPREAD + i)));
    job.materialize("extremes", spread.aggregate_sets("op_extremes", Extremes));
    assert!(inserts.is_monotonic() && !left.is_monotonic());
    let inserted = inserts.aggregate("op_inserted", (Count, Min(|v: &i64| *v), Max(|v: &i64| *v)));
    job.materialize("inserted", inserted);
    job.materialize("avg", left.clone().aggregate("op_avg", Avg(|v: &i64| *v)));
    let fold = Fold::new(fold_update, |count: i64, state: &(i64, i64)| (count, state.0, state.1));
    job.materialize("fold", left.clone().aggregate("op_fold", fold));
    job.materialize("reduce", left.clone().reduce("op_reduce", reduce_logic));
    job.materialize("top1", left.clone().top_k("op_top1", 1));
    let top3 = left.clone().top_k("op_top3", 3);
    job.materialize("top3", top3.clone());
    // An operator fed by another one's retractions.
    job.materialize("top3_sum", top3.aggregate("op_top3_sum", (Count, Sum(|v: &i64| *v))));
    job.materialize("distinct", left.clone().distinct("op_distinct"));
    job.materialize("distinct_keys", left.clone().map(|(k, _)| k).distinct("op_distinct_keys"));
    job.materialize("join", left.clone().join("op_join", right.clone()));
    job.materialize("left_join", left.left_join("op_left_join", right));
    job.materialize("upserted", table.clone());
    let by_value = table.map(|(k, v)| (v.rem_euclid(3), k)).aggregate("op_by_value", (Count, Sum(|k: &u8| *k as i64)));
    job.materialize("table_by_value", by_value);
}

/// Items per value in the `extremes` view's input: 10 distinct values a
/// key make 400 items, past a set's inline cap.
const SPREAD: i64 = 40;

const VIEWS: [&str; 15] = [
    "stats",
    "extremes",
    "inserted",
    "avg",
    "fold",
    "reduce",
    "top1",
    "top3",
    "top3_sum",
    "distinct",
    "distinct_keys",
    "join",
    "left_join",
    "upserted",
    "table_by_value",
];

#[derive(Clone, Copy, Debug)]
struct Setup {
    workers: usize,
    state: StateBackend,
    fetch_bytes_max: usize,
}

/// A finished run: its counters and the epoch of every left change.
struct Ran {
    stats: RunStats,
    seen: Vec<((u8, i64), Epoch, Diff)>,
}

impl Ran {
    /// Retractions read in a later epoch than an insertion of the same `(k, v)`.
    fn later_retractions(&self) -> usize {
        let mut first_insert: BTreeMap<(u8, i64), Epoch> = BTreeMap::new();
        for (kv, epoch, diff) in &self.seen {
            if *diff > 0 {
                let first = first_insert.entry(*kv).or_insert(*epoch);
                *first = (*first).min(*epoch);
            }
        }
        self.seen
            .iter()
            .filter(|(kv, epoch, diff)| *diff < 0 && first_insert.get(kv).is_some_and(|e| e < epoch))
            .count()
    }

    /// How many epochs the left stream's changes were read in.
    fn input_epochs(&self) -> usize {
        self.seen.iter().map(|(_, epoch, _)| *epoch).collect::<std::collections::BTreeSet<_>>().len()
    }
}

fn run(dir: &Path, setup: Setup) -> Ran {
    let config = RuntimeConfig::new(dir)
        .workers(setup.workers)
        .epoch_interval_ms(1)
        .fetch_bytes_max(setup.fetch_bytes_max)
        .state(setup.state)
        .stop_when_caught_up(true);
    let seen = Seen::default();
    let job_seen = seen.clone();
    let stats = Runtime::run(config, move |job| build(job, &job_seen)).unwrap();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    Ran { stats, seen }
}

// ---------------------------------------------------------------------------
// The reference: every view from the final input, in plain Rust.

fn multiset(deltas: &[Delta]) -> Multiset {
    let mut out: Multiset = BTreeMap::new();
    for &(k, v, d) in deltas {
        *out.entry(k).or_default().entry(v).or_insert(0) += d;
    }
    for values in out.values_mut() {
        assert!(values.values().all(|&c| c >= 0), "the generator keeps multiplicities non-negative");
        values.retain(|_, c| *c != 0);
    }
    out.retain(|_, values| !values.is_empty());
    out
}

/// The latest value per key of an upsert stream (tombstones delete).
fn table(records: &[(u8, Option<i64>)]) -> BTreeMap<u8, i64> {
    let mut out = BTreeMap::new();
    for &(k, v) in records {
        match v {
            Some(v) => out.insert(k, v),
            None => out.remove(&k),
        };
    }
    out
}

/// The `k` greatest values of a key, with multiplicities.
fn top(values: &BTreeMap<i64, i64>, k: i64) -> Vec<(i64, i64)> {
    let mut left = k;
    let mut out = Vec::new();
    for (&v, &c) in values.iter().rev() {
        if left == 0 {
            break;
        }
        let take = c.min(left);
        out.push((v, take));
        left -= take;
    }
    out
}

fn expected(left: &Multiset, right: &Multiset, upserts: &BTreeMap<u8, i64>) -> Views {
    let mut views = Views::new();
    let all = || left.iter().flat_map(|(k, values)| values.iter().map(move |(v, c)| (*k, *v, *c)));
    views.insert(
        "stats",
        rows_of(left.iter().map(|(k, values)| {
            let count: i64 = values.values().sum();
            let sum: i64 = values.iter().map(|(v, c)| v * c).sum();
            let (min, max) = (values.keys().next().copied(), values.keys().next_back().copied());
            ((*k, (count, sum, min, max)), 1)
        })),
    );
    views.insert(
        "extremes",
        rows_of(left.iter().map(|(k, values)| {
            let (min, max) = (values.keys().next().unwrap(), values.keys().next_back().unwrap());
            let distinct = values.len() as u64 * SPREAD as u64;
            ((*k, (min * SPREAD, max * SPREAD + SPREAD - 1, distinct)), 1)
        })),
    );
    views.insert(
        "fold",
        rows_of(left.iter().map(|(k, values)| {
            let count: i64 = values.values().sum();
            let squares: i64 = values.iter().map(|(v, c)| v * v * c).sum();
            let evens: i64 = values.iter().filter(|(v, _)| *v % 2 == 0).map(|(_, c)| c).sum();
            ((*k, (count, squares, evens)), 1)
        })),
    );
    views.insert(
        "reduce",
        rows_of(left.iter().flat_map(|(k, values)| {
            let residues = values.iter().map(|(v, c)| ((*k, (0u8, v.rem_euclid(3))), *c));
            residues.chain([((*k, (1, values.len() as i64)), 1)])
        })),
    );
    for (name, n) in [("top1", 1), ("top3", 3)] {
        views.insert(
            name,
            rows_of(left.iter().flat_map(|(k, values)| top(values, n).into_iter().map(|(v, c)| ((*k, v), c)))),
        );
    }
    views.insert(
        "top3_sum",
        rows_of(left.iter().map(|(k, values)| {
            let top3 = top(values, 3);
            ((*k, (top3.iter().map(|(_, c)| c).sum::<i64>(), top3.iter().map(|(v, c)| v * c).sum::<i64>())), 1)
        })),
    );
    views.insert("distinct", rows_of(all().map(|(k, v, _)| ((k, v), 1))));
    views.insert("distinct_keys", rows_of(left.keys().map(|k| (*k, 1))));
    let pairs = || {
        all().flat_map(|(k, v, c)| {
            right.get(&k).into_iter().flat_map(move |ws| ws.iter().map(move |(w, cw)| ((k, (v, *w)), c * cw)))
        })
    };
    views.insert("join", rows_of(pairs()));
    let unmatched = all().filter(|(k, _, _)| !right.contains_key(k)).map(|(k, v, c)| ((k, (v, None::<i64>)), c));
    views.insert("left_join", rows_of(pairs().map(|((k, (v, w)), c)| ((k, (v, Some(w))), c)).chain(unmatched)));
    views.insert("upserted", rows_of(upserts.iter().map(|(k, v)| ((*k, *v), 1))));
    let mut by_value: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for (k, v) in upserts {
        let entry = by_value.entry(v.rem_euclid(3)).or_default();
        entry.0 += 1;
        entry.1 += *k as i64;
    }
    views.insert("table_by_value", rows_of(by_value.into_iter().map(|(r, stats)| ((r, stats), 1))));
    views
}

/// The `inserted` view: per key, the number of left records that insert
/// and the least and greatest of their values.
fn expected_inserted(left: &[Delta]) -> BTreeMap<String, i64> {
    let mut per_key: BTreeMap<u8, (i64, i64, i64)> = BTreeMap::new();
    for &(k, v, _) in left.iter().filter(|(_, _, d)| *d > 0) {
        let entry = per_key.entry(k).or_insert((0, v, v));
        *entry = (entry.0 + 1, entry.1.min(v), entry.2.max(v));
    }
    rows_of(per_key.into_iter().map(|(k, (n, min, max))| ((k, (n, Some(min), Some(max))), 1)))
}

/// The per-key mean, compared with a tolerance (it goes through JSON text).
fn expected_avg(left: &Multiset) -> BTreeMap<u8, f64> {
    left.iter()
        .map(|(k, values)| {
            let count: i64 = values.values().sum();
            let sum: i64 = values.iter().map(|(v, c)| v * c).sum();
            (*k, sum as f64 / count as f64)
        })
        .collect()
}

/// Compares every view with the reference; returns the mismatches.
fn check_views(dir: &Path, left: &[Delta], right: &Multiset, upserts: &BTreeMap<u8, i64>) -> Vec<String> {
    let mut want = expected(&multiset(left), right, upserts);
    want.insert("inserted", expected_inserted(left));
    let left = &multiset(left);
    let mut problems = Vec::new();
    for (name, rows) in &want {
        let got = view_rows(dir, name);
        if &got != rows {
            problems.push(format!("view {name}:\n  got      {got:?}\n  expected {rows:?}"));
        }
    }
    let avg = read_view(dir, "avg").unwrap();
    let mut got_avg = BTreeMap::new();
    for (row, n) in &avg.rows {
        let (k, mean): (u8, f64) = serde_json::from_value(row.clone()).unwrap();
        if *n != 1 || got_avg.insert(k, mean).is_some() {
            problems.push(format!("view avg: row {row} has multiplicity {n} or repeats its key"));
        }
    }
    let want_avg = expected_avg(left);
    let close = got_avg.len() == want_avg.len()
        && got_avg.iter().zip(&want_avg).all(|((k1, a), (k2, b))| k1 == k2 && (a - b).abs() <= 1e-9 * b.abs().max(1.0));
    if !close {
        problems.push(format!("view avg:\n  got      {got_avg:?}\n  expected {want_avg:?}"));
    }
    problems
}

// ---------------------------------------------------------------------------
// Inputs.

/// One generated step of a change stream: `(key, value, kind, pick, multiplicity)`.
type Step = (u8, i64, u8, usize, i64);

/// Turns random steps into changes whose running multiset never goes
/// negative. Kinds 0..=3 retract present values of the key (favouring its
/// current minimum and maximum), kind 9 retracts all of a key, the rest insert.
fn to_deltas(steps: &[Step]) -> Vec<Delta> {
    let mut counts: BTreeMap<u8, BTreeMap<i64, i64>> = BTreeMap::new();
    let mut out = Vec::new();
    for &(k, v, kind, pick, mult) in steps {
        let values = counts.entry(k).or_default();
        let present: Vec<(i64, i64)> = values.iter().map(|(v, c)| (*v, *c)).collect();
        if kind == 9 && !present.is_empty() {
            for (v, c) in present {
                out.push((k, v, -c));
            }
            values.clear();
            continue;
        }
        let (v, d) = if kind <= 3 && !present.is_empty() {
            let (v, c) = match pick % 3 {
                0 => present[0],
                1 => present[present.len() - 1],
                _ => present[pick % present.len()],
            };
            (v, -mult.min(c))
        } else {
            (v, mult)
        };
        let count = values.entry(v).or_insert(0);
        *count += d;
        if *count == 0 {
            values.remove(&v);
        }
        out.push((k, v, d));
    }
    out
}

fn steps(keys: u8, values: std::ops::Range<i64>, len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec((0..keys, values, 0u8..10, 0usize..16, 1i64..=2), len)
}

/// Splits `records` into produce calls of the given sizes (cycled).
fn batches<T: Clone>(records: &[T], sizes: &[usize]) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut start = 0;
    for &size in sizes.iter().cycle() {
        if start >= records.len() {
            break;
        }
        let end = (start + size.max(1)).min(records.len());
        out.push(records[start..end].to_vec());
        start = end;
    }
    out
}

fn change_records(deltas: &[Delta]) -> Vec<Produced> {
    deltas.iter().map(|(k, v, d)| (Some(format!("{k}:{v}")), Some(format!(r#"{{"k":{k},"v":{v},"d":{d}}}"#)))).collect()
}

fn table_records(records: &[(u8, Option<i64>)]) -> Vec<Produced> {
    records.iter().map(|(k, v)| (Some(k.to_string()), v.map(|v| v.to_string()))).collect()
}

/// A generated input: the change streams, the upsert stream, and how they
/// are split into produce calls.
#[derive(Clone, Debug)]
struct Input {
    left: Vec<Delta>,
    right: Vec<Delta>,
    table: Vec<(u8, Option<i64>)>,
    sizes: Vec<usize>,
    partitions: u32,
    fetch_bytes_max: usize,
}

fn input(len: usize) -> impl Strategy<Value = Input> {
    (
        steps(5, -4..6, 0..len),
        // Few right values and frequent whole-key retractions: right sides
        // appear, disappear and reappear.
        steps(6, 100..103, 0..len / 2),
        proptest::collection::vec((0u8..6, proptest::option::weighted(0.75, -5i64..5)), 0..len / 2),
        proptest::collection::vec(1usize..5, 1..8),
        1u32..=4,
        prop_oneof![3 => 256usize..1024, 1 => 1024usize..4096],
    )
        .prop_map(|(left, right, table, sizes, partitions, fetch_bytes_max)| Input {
            left: to_deltas(&left),
            right: to_deltas(&right),
            table,
            sizes,
            partitions,
            fetch_bytes_max,
        })
}

/// Produces `input`'s records from `from` (a fraction of each stream's
/// length, 0.0..=1.0) to `to`.
fn produce_part(dir: &Path, input: &Input, from: f64, to: f64) {
    let part = |len: usize| (len as f64 * from) as usize..(len as f64 * to) as usize;
    let left = change_records(&input.left[part(input.left.len())]);
    let right = change_records(&input.right[part(input.right.len())]);
    let table = table_records(&input.table[part(input.table.len())]);
    produce_batches(dir, LEFT, input.partitions, &batches(&left, &input.sizes));
    produce_batches(dir, RIGHT, input.partitions, &batches(&right, &input.sizes));
    produce_batches(dir, TABLE, input.partitions, &batches(&table, &input.sizes));
}

/// Checks the views after `input`'s streams up to fraction `to` are read.
fn check_prefix(dir: &Path, input: &Input, to: f64) -> Vec<String> {
    let prefix = |len: usize| (len as f64 * to) as usize;
    check_views(
        dir,
        &input.left[..prefix(input.left.len())],
        &multiset(&input.right[..prefix(input.right.len())]),
        &table(&input.table[..prefix(input.table.len())]),
    )
}

fn record_count(input: &Input, from: f64, to: f64) -> u64 {
    let part = |len: usize| ((len as f64 * to) as usize - (len as f64 * from) as usize) as u64;
    part(input.left.len()) + part(input.right.len()) + part(input.table.len())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, max_shrink_iters: 64, ..ProptestConfig::default() }
}

/// How much of the interesting ground the cases of a property covered.
#[derive(Debug, Default)]
struct Coverage {
    cases: usize,
    /// Cases with at least 10 retractions in the left stream, read with
    /// fetches under 1 KiB (the others may read a partition in one fetch).
    retracting: usize,
    /// ... of which some retraction was read in a later epoch than its insertion.
    retracting_across_epochs: usize,
    /// Retractions read in a later epoch than their insertion, in all cases.
    later_retractions: usize,
}

/// Runs the job on all of `input` in one run and checks every view.
fn one_run(
    input: &Input,
    workers: usize,
    state: StateBackend,
    coverage: &Mutex<Coverage>,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    produce_part(dir.path(), input, 0.0, 1.0);
    let ran = run(dir.path(), Setup { workers, state, fetch_bytes_max: input.fetch_bytes_max });
    prop_assert_eq!(ran.stats.records, record_count(input, 0.0, 1.0));
    prop_assert_eq!(ran.stats.dead_letters, 0);
    prop_assert_eq!(ran.seen.len(), input.left.len(), "every left change is seen once");
    let problems = check_prefix(dir.path(), input, 1.0);
    prop_assert!(problems.is_empty(), "{}", problems.join("\n"));
    let mut coverage = coverage.lock().unwrap();
    coverage.cases += 1;
    if input.left.iter().filter(|d| d.2 < 0).count() >= 10 && input.fetch_bytes_max < 1024 {
        coverage.retracting += 1;
        coverage.retracting_across_epochs += usize::from(ran.later_retractions() > 0);
    }
    coverage.later_retractions += ran.later_retractions();
    Ok(())
}

/// Checks `one_run` on `cases` random inputs, then that the inputs did
/// exercise retractions across epochs (the point of the test).
fn one_run_property(cases: u32, workers: usize, state: StateBackend) {
    let coverage = Mutex::new(Coverage::default());
    let mut runner = proptest::test_runner::TestRunner::new(config(cases));
    let result = runner.run(&input(300), |input| one_run(&input, workers, state, &coverage));
    if let Err(e) = result {
        panic!("{e}");
    }
    let coverage = coverage.into_inner().unwrap();
    assert_eq!(coverage.cases, cases as usize);
    assert!(
        coverage.later_retractions > 0 && coverage.retracting_across_epochs >= coverage.retracting / 2,
        "too few retractions were read in a later epoch than their insertions: {coverage:?}"
    );
}

#[test]
fn every_operator_matches_a_recomputation_one_worker_in_memory() {
    one_run_property(12, 1, StateBackend::Memory);
}

#[test]
fn every_operator_matches_a_recomputation_two_workers_on_rocksdb() {
    one_run_property(6, 2, StateBackend::RocksDb);
}

proptest! {
    #![proptest_config(config(6))]

    /// Half the input, a run until caught up, the rest, a second run (with
    /// another worker count) that resumes from the checkpoint.
    #[test]
    fn every_operator_matches_a_recomputation_across_a_restart(
        input in input(300),
        split in 0.2f64..0.8,
        workers in (1usize..=2, 1usize..=2),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        produce_part(path, &input, 0.0, split);
        let setup = Setup { workers: workers.0, state: StateBackend::RocksDb, fetch_bytes_max: input.fetch_bytes_max };
        let first = run(path, setup).stats;
        prop_assert_eq!(first.records, record_count(&input, 0.0, split));
        let problems = check_prefix(path, &input, split);
        prop_assert!(problems.is_empty(), "after the first run:\n{}", problems.join("\n"));
        produce_part(path, &input, split, 1.0);
        let second = run(path, Setup { workers: workers.1, ..setup }).stats;
        prop_assert_eq!(second.records, record_count(&input, split, 1.0), "only new records are read");
        prop_assert!(second.first_epoch > first.committed_epoch);
        let problems = check_prefix(path, &input, 1.0);
        prop_assert!(problems.is_empty(), "after the second run:\n{}", problems.join("\n"));
    }
}

// ---------------------------------------------------------------------------
// Fixed scenarios, each step in its own run, so that every retraction is
// processed in a later epoch (and a later run) than its insertion.

/// One step of a fixed scenario: changes to the left and right streams and
/// records of the upsert stream.
type StepInput = (Vec<Delta>, Vec<Delta>, Vec<(u8, Option<i64>)>);

/// Runs the job once per step, producing the step's changes first, and
/// checks every view after each run.
fn run_steps(steps: &[StepInput], setup: Setup) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let (mut left, mut right, mut upserts) = (Vec::new(), Vec::new(), Vec::new());
    let mut last_epoch = 0;
    for (i, (l, r, t)) in steps.iter().enumerate() {
        let one_per_call = |records: Vec<Produced>| records.into_iter().map(|r| vec![r]).collect::<Vec<_>>();
        produce_batches(path, LEFT, 3, &one_per_call(change_records(l)));
        produce_batches(path, RIGHT, 3, &one_per_call(change_records(r)));
        produce_batches(path, TABLE, 3, &one_per_call(table_records(t)));
        let stats = run(path, setup).stats;
        assert_eq!(stats.records, (l.len() + r.len() + t.len()) as u64, "step {i}");
        assert!(stats.first_epoch > last_epoch, "step {i}: epochs increase across runs");
        last_epoch = stats.committed_epoch;
        left.extend_from_slice(l);
        right.extend_from_slice(r);
        upserts.extend_from_slice(t);
        let problems = check_views(path, &left, &multiset(&right), &table(&upserts));
        assert!(problems.is_empty(), "after step {i}:\n{}", problems.join("\n"));
    }
    dir
}

#[test]
fn min_and_max_fall_back_when_the_current_extreme_is_retracted() {
    let setup = Setup { workers: 1, state: StateBackend::RocksDb, fetch_bytes_max: 256 };
    let steps = vec![
        (vec![(1, 5, 1), (1, 3, 1), (1, 9, 2), (1, 7, 1), (2, 4, 1)], vec![], vec![]),
        // Retract the minimum; one of two copies of the maximum.
        (vec![(1, 3, -1), (1, 9, -1)], vec![], vec![]),
        // The other copy of the maximum; a new minimum below the old one.
        (vec![(1, 9, -1), (1, 1, 1)], vec![], vec![]),
        // Down to one value, then that value retracted and another inserted.
        (vec![(1, 1, -1), (1, 7, -1)], vec![], vec![]),
        (vec![(1, 5, -1), (1, 6, 3), (2, 4, -1)], vec![], vec![]),
        // A key that vanished comes back.
        (vec![(2, -8, 1), (2, 8, 1)], vec![], vec![]),
    ];
    let dir = run_steps(&steps, setup);
    // Spot check, independent of the reference code: key 1 holds {6: 3}, key 2 {-8, 8}.
    let want = rows_of([((1u8, (3i64, 18i64, Some(6i64), Some(6i64))), 1i64), ((2, (2, 0, Some(-8), Some(8))), 1)]);
    assert_eq!(view_rows(dir.path(), "stats"), want);
}

#[test]
fn left_join_swaps_unmatched_rows_as_the_right_side_appears_disappears_and_reappears() {
    let setup = Setup { workers: 2, state: StateBackend::RocksDb, fetch_bytes_max: 256 };
    let steps = vec![
        // Key 1 has no right side: (v, null) rows; key 2 matches.
        (vec![(1, 10, 1), (1, 11, 2), (2, 20, 1)], vec![(2, 200, 1)], vec![]),
        // Key 1's right side appears (twice the same value: multiplicity 2).
        (vec![], vec![(1, 100, 2)], vec![]),
        // ... disappears: one copy, then the other.
        (vec![], vec![(1, 100, -1)], vec![]),
        (vec![], vec![(1, 100, -1)], vec![]),
        // ... and reappears with another value, while the left side changes too.
        (vec![(1, 12, 1), (1, 10, -1)], vec![(1, 101, 1)], vec![]),
        // Both sides change in one step: right goes away as left grows.
        (vec![(1, 13, 1)], vec![(1, 101, -1)], vec![]),
        // The left side goes away entirely; then the right side reappears alone.
        (vec![(1, 11, -2), (1, 12, -1), (1, 13, -1)], vec![], vec![]),
        (vec![], vec![(1, 102, 1)], vec![]),
    ];
    let dir = run_steps(&steps, setup);
    assert_eq!(view_rows(dir.path(), "left_join"), rows_of([((2u8, (20i64, Some(200i64))), 1i64)]));
    assert_eq!(view_rows(dir.path(), "join"), rows_of([((2u8, (20i64, 200i64)), 1i64)]));
}

#[test]
fn upsert_source_follows_updates_and_tombstones_across_runs() {
    let setup = Setup { workers: 2, state: StateBackend::RocksDb, fetch_bytes_max: 256 };
    let steps = vec![
        (vec![], vec![], vec![(1, Some(10)), (2, Some(20)), (3, Some(30)), (1, Some(11))]),
        // Updates, a tombstone, a tombstone of a key never seen, an unchanged value.
        (vec![], vec![], vec![(2, Some(21)), (3, None), (4, None), (1, Some(11))]),
        // A deleted key comes back; a key is deleted and set again in one step.
        (vec![], vec![], vec![(3, Some(31)), (2, None), (2, Some(22)), (5, Some(50)), (5, None)]),
        (vec![], vec![], vec![(1, None), (2, None), (3, None)]),
        (vec![], vec![], vec![(1, Some(12))]),
    ];
    let dir = run_steps(&steps, setup);
    assert_eq!(view_rows(dir.path(), "upserted"), rows_of([((1u8, 12i64), 1i64)]));
}

#[test]
fn top_k_with_ties_and_duplicates_across_runs() {
    let setup = Setup { workers: 1, state: StateBackend::RocksDb, fetch_bytes_max: 256 };
    let steps = vec![
        (vec![(1, 5, 2), (1, 5, 1), (1, 4, 1), (1, 9, 1)], vec![], vec![]),
        // The top value goes; the 5s (three copies) fill the top 3.
        (vec![(1, 9, -1), (1, 4, 2)], vec![], vec![]),
        (vec![(1, 5, -2), (1, 7, 1)], vec![], vec![]),
        (vec![(1, 7, -1), (1, 5, -1), (1, 3, 3)], vec![], vec![]),
        (vec![(2, 1, 1), (2, 1, 1), (2, 1, 1), (2, 1, 1)], vec![], vec![]),
    ];
    let dir = run_steps(&steps, setup);
    // Spot checks, independent of the reference code.
    assert_eq!(view_rows(dir.path(), "top1"), rows_of([((1u8, 4i64), 1i64), ((2, 1), 1)]));
    assert_eq!(view_rows(dir.path(), "top3"), rows_of([((1u8, 4i64), 3i64), ((2, 1), 3)]));
    assert_eq!(view_rows(dir.path(), "top3_sum"), rows_of([((1u8, (3i64, 12i64)), 1i64), ((2, (3, 3)), 1)]));
}

#[test]
fn every_view_is_listed_and_the_input_spans_many_epochs() {
    let dir = tempfile::tempdir().unwrap();
    // 300 insertions, then the first 150 retracted in the same order.
    let mut deltas: Vec<Delta> = (0..300).map(|i| ((i % 5) as u8, (i % 17) as i64, 1)).collect();
    deltas.extend(deltas[..150].iter().map(|(k, v, _)| (*k, *v, -1)).collect::<Vec<_>>());
    let records = change_records(&deltas);
    produce_batches(dir.path(), LEFT, 4, &batches(&records, &[1, 2, 3]));
    let ran = run(dir.path(), Setup { workers: 2, state: StateBackend::RocksDb, fetch_bytes_max: 256 });
    assert_eq!(ran.stats.records, 450);
    eprintln!(
        "DEBUG epochs {} later {} changelog {:?}",
        ran.input_epochs(),
        ran.later_retractions(),
        changelog_epochs(dir.path(), "stats").len()
    );
    assert!(ran.input_epochs() >= 5, "the input is read over many epochs: {}", ran.input_epochs());
    assert!(
        ran.later_retractions() >= 50,
        "retractions come epochs after their insertions: {}",
        ran.later_retractions()
    );
    assert!(changelog_epochs(dir.path(), "stats").len() >= 5, "the view changes in many epochs");
    let listed: Vec<String> = millpond_dataflow::list_views(dir.path()).unwrap().into_iter().map(|v| v.name).collect();
    for name in VIEWS {
        assert!(listed.iter().any(|l| l == name), "view {name} is listed: {listed:?}");
    }
    let problems = check_views(dir.path(), &deltas, &BTreeMap::new(), &BTreeMap::new());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The epochs in which a view changed, from its changelog's `epoch` headers.
fn changelog_epochs(dir: &Path, view: &str) -> std::collections::BTreeSet<u64> {
    common::changes_per_epoch(dir, view).into_keys().collect()
}

// ---------------------------------------------------------------------------
// A difference of two streams: transiently negative multiplicities.

/// Count, sum, min and max.
type Stats = (i64, i64, Option<i64>, Option<i64>);

/// `left - right` per key, aggregated, next to the same statistics computed
/// with `reduce` (which keeps the whole multiset).
fn build_difference(job: &mut Job<'_>) {
    let left = job.source(LEFT, json::<Change>()).explode(|c: Change| Some(((c.k, c.v), c.d)));
    let right = job.source(RIGHT, json::<Change>()).explode(|c: Change| Some(((c.k, c.v), c.d)));
    let difference = left.concat(right.negate());
    let stats =
        difference.clone().aggregate("op_stats", (Count, Sum(|v: &i64| *v), Min(|v: &i64| *v), Max(|v: &i64| *v)));
    job.materialize("stats", stats);
    let by_reduce = difference.reduce("op_reduce", |_k: &u8, values: &[(i64, Diff)], out: &mut Vec<(Stats, Diff)>| {
        let count: i64 = values.iter().map(|(_, c)| *c as i64).sum();
        if count > 0 {
            let sum = values.iter().map(|(v, c)| v * *c as i64).sum();
            let present = || values.iter().filter(|(_, c)| *c > 0).map(|(v, _)| *v);
            out.push(((count, sum, present().min(), present().max()), 1));
        }
    });
    job.materialize("stats_by_reduce", by_reduce);
}

/// An order arrives after its shipment (another topic, read earlier): for a
/// while `ordered - shipped` holds `{5: -1, 7: +1}` for key 1, whose count is
/// 0 although the multiset is not empty. Once the order arrives the
/// difference is `{7: 1}`. `aggregate`'s module documentation says an
/// accumulator depends only on the multiset its updates sum to.
#[test]
fn aggregate_of_a_difference_is_right_after_a_key_held_a_zero_count_but_not_an_empty_multiset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let config =
        || RuntimeConfig::new(path).workers(1).epoch_interval_ms(1).fetch_bytes_max(256).stop_when_caught_up(true);
    produce_batches(path, LEFT, 1, &batches(&change_records(&[(1, 7, 1), (2, 1, 1)]), &[1]));
    produce_batches(path, RIGHT, 1, &batches(&change_records(&[(1, 5, 1)]), &[1]));
    Runtime::run(config(), build_difference).unwrap();
    // Key 1's count is 0, so neither view has a row for it.
    let key2 = rows_of([((2u8, (1i64, 1i64, Some(1i64), Some(1i64))), 1i64)]);
    assert_eq!(view_rows(path, "stats_by_reduce"), key2);
    assert_eq!(view_rows(path, "stats"), key2);
    produce_batches(path, LEFT, 1, &batches(&change_records(&[(1, 5, 1)]), &[1]));
    Runtime::run(config(), build_difference).unwrap();
    let want = rows_of([
        ((1u8, (1i64, 7i64, Some(7i64), Some(7i64))), 1i64),
        ((2u8, (1i64, 1i64, Some(1i64), Some(1i64))), 1i64),
    ]);
    assert_eq!(view_rows(path, "stats_by_reduce"), want, "reduce keeps the multiset");
    assert_eq!(view_rows(path, "stats"), want, "aggregate: count, sum, min and max of {{7: 1}}");
}
