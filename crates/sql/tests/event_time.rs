//! A source's WATERMARK against a from-scratch recomputation: random
//! records over several partitions, appended in phases, each phase run by a
//! new runtime (resuming the views' state) with its own epoch size, so the
//! epochs cut the records differently every time. After each phase the
//! views must hold exactly what the oracle computes from the log itself:
//! per partition, in offset order, a record is late when its time is below
//! the greatest earlier on-time time minus the delay; the watermark is the
//! least such greatest time over the partitions, minus the delay; a window
//! is in a windowed view once its end is at or below the watermark, with
//! the aggregates of its on-time records; a session (per key, the on-time
//! records' times sorted, a new session at each gap) likewise, with its
//! rows.
//!
//! Every partition's first record has the least time of all, so no
//! partition lowers the minimum when it is first read (the one case where
//! the outcome depends on how the epochs cut the partitions: module
//! `millpond_dataflow::event_time`).
//!
//! `MILLPOND_EVENT_TIME_SEEDS=1,2,3` picks the seeds (default 1,2).
use std::collections::BTreeMap;
use std::path::Path;

use millpond_dataflow::{RuntimeConfig, TopicRecord, TopicSpec, Topics, read_view};
use millpond_sql::Session;

const TOPIC: &str = "ev";
const PARTITIONS: u32 = 3;
const DELAY_S: i64 = 3;
/// 2024-01-01 00:00:00 in milliseconds: every time is on that day.
const DAY_MS: i64 = 1_704_067_200_000;
const KEYS: i64 = 12;

const DEFINITIONS: &str = "
CREATE SOURCE ev (k BIGINT, v BIGINT, at TIMESTAMP, WATERMARK FOR at AS at - INTERVAL '3' SECOND)
    FROM TOPIC 'ev' FORMAT JSON;
CREATE MATERIALIZED VIEW tumbling AS
    SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo, MAX(v) AS hi
    FROM TUMBLE(ev, at, INTERVAL '5' SECOND) GROUP BY k, window_start, window_end;
CREATE MATERIALIZED VIEW hopping WITH (late_rows = 'dead_letter') AS
    SELECT window_end, COUNT(*) AS n
    FROM HOP(ev, at, INTERVAL '2' SECOND, INTERVAL '6' SECOND) WHERE v % 3 <> 0 GROUP BY window_end;
CREATE MATERIALIZED VIEW on_time AS SELECT k, v, at FROM ev;
CREATE MATERIALIZED VIEW sessions AS
    SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS s
    FROM SESSION(ev, at, INTERVAL '2' SECOND, k) GROUP BY k, window_start, window_end;
CREATE MATERIALIZED VIEW busiest AS
    SELECT window_end, MAX(n) AS most, COUNT(*) AS keys
    FROM (SELECT k, window_end, COUNT(*) AS n FROM TUMBLE(ev, at, INTERVAL '5' SECOND) GROUP BY k, window_end) w
    GROUP BY window_end;
CREATE MATERIALIZED VIEW window_join AS
    SELECT a.k, a.window_start, a.n, b.top
    FROM (SELECT k, window_start, window_end, COUNT(*) AS n
          FROM TUMBLE(ev, at, INTERVAL '5' SECOND) GROUP BY k, window_start, window_end) a
    JOIN (SELECT k % 3 AS k3, window_end, MAX(v) AS top
          FROM TUMBLE(ev, at, INTERVAL '5' SECOND) GROUP BY k % 3, window_end) b
    ON a.k % 3 = b.k3 AND a.window_end = b.window_end;
CREATE MATERIALIZED VIEW session_rows AS
    SELECT k, v, at, window_start, window_end FROM SESSION(ev, at, INTERVAL '3' SECOND, k % 4) WHERE v < 50;
";

/// A small deterministic generator (xorshift*), so a seed names a run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// An event: key, value, time in seconds after midnight (None: NULL).
type Event = (i64, i64, Option<i64>);

fn record((k, v, at): Event) -> TopicRecord {
    let at = at.map_or("null".to_owned(), |s| (DAY_MS + s * 1000).to_string());
    let value = format!(r#"{{"k": {k}, "v": {v}, "at": {at}}}"#);
    TopicRecord { key: Some(format!("key-{k}").into_bytes()), value: Some(value.into_bytes()), headers: vec![] }
}

/// The run's events in phases: first one record per key at the least time
/// (so that every partition starts there), then times that mostly rise,
/// with jitter that makes some late.
fn phases(rng: &mut Rng) -> Vec<Vec<Event>> {
    let start_s = 36_000;
    let mut events: Vec<Event> = (0..KEYS).map(|k| (k, 0, Some(start_s))).collect();
    let first = events.len();
    for i in 0..800i64 {
        let k = rng.below(KEYS as u64) as i64;
        let v = rng.below(100) as i64;
        let jitter = rng.below(9) as i64 - 6;
        let at = (rng.below(40) != 0).then_some(start_s + 1 + i / 4 + jitter.max(-(i / 4)));
        events.push((k, v, at));
    }
    let mut cuts: Vec<usize> = (0..3).map(|_| first + rng.below((events.len() - first) as u64) as usize).collect();
    cuts.sort_unstable();
    let mut bounds = vec![0, first];
    bounds.extend(cuts);
    bounds.push(events.len());
    bounds.dedup();
    bounds.windows(2).map(|w| events[w[0]..w[1]].to_vec()).collect()
}

/// A tumbling window: key, start and end (seconds after midnight).
type Window = (i64, i64, i64);
/// Its aggregates: count, sum, min, max.
type Totals = (i64, i64, i64, i64);

/// What the views must hold, computed from the records as the log holds them.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    tumbling: BTreeMap<Window, Totals>,
    hopping: BTreeMap<i64, i64>,
    on_time: BTreeMap<(i64, i64, Option<i64>), i64>,
    /// (k, start, end) -> (count, sum).
    sessions: BTreeMap<Window, (i64, i64)>,
    /// (k, v, at, start, end) -> count.
    session_rows: BTreeMap<(i64, i64, i64, i64, i64), i64>,
    /// window end -> (most records of one key, keys).
    busiest: BTreeMap<i64, (i64, i64)>,
    /// (k, window start) -> (count, the greatest v of the keys k % 3 names).
    window_join: BTreeMap<(i64, i64), (i64, i64)>,
}

/// What the windowed views keep in state after a run, from the records:
/// the open tumbling windows, and the on-time rows of `sessions`' open
/// sessions.
#[derive(Debug, Default)]
struct Open {
    windows: usize,
    session_rows: usize,
}

/// The sessions of the timed events grouped by `key`, from scratch: each
/// event with its session's start and end (seconds), where a session
/// ends `gap` after its last time and a time at or past the end starts a
/// new one.
fn sessions_of(events: &[Event], gap: i64, key: impl Fn(i64) -> i64) -> Vec<(Event, i64, i64)> {
    let mut by_key: BTreeMap<i64, Vec<(i64, Event)>> = BTreeMap::new();
    for &(k, v, at) in events {
        if let Some(t) = at {
            by_key.entry(key(k)).or_default().push((t, (k, v, at)));
        }
    }
    let mut out = Vec::new();
    for (_, mut timed) in by_key {
        timed.sort_by_key(|(t, _)| *t);
        let mut runs: Vec<Vec<(i64, Event)>> = Vec::new();
        for (t, event) in timed {
            match runs.last_mut() {
                Some(run) if t < run.last().unwrap().0 + gap => run.push((t, event)),
                _ => runs.push(vec![(t, event)]),
            }
        }
        for run in runs {
            let (start, end) = (run[0].0, run.last().unwrap().0 + gap);
            out.extend(run.into_iter().map(|(_, event)| (event, start, end)));
        }
    }
    out
}

fn oracle(dir: &Path) -> (Expected, u64, Open) {
    let topics = Topics::open(dir).unwrap();
    let mut stored = topics.read_all(TOPIC).unwrap();
    stored.sort_by_key(|r| (r.partition, r.offset));
    let (mut maxima, mut on_time, mut late) = (BTreeMap::<u32, i64>::new(), Vec::new(), 0);
    for r in &stored {
        let json: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        let at = json["at"].as_i64().map(|ms| (ms - DAY_MS) / 1000);
        let event = (json["k"].as_i64().unwrap(), json["v"].as_i64().unwrap(), at);
        match (at, maxima.get(&r.partition)) {
            (Some(t), Some(max)) if t < max - DELAY_S => late += 1,
            (Some(t), _) => {
                let max = maxima.entry(r.partition).or_insert(t);
                *max = (*max).max(t);
                on_time.push(event);
            }
            (None, _) => on_time.push(event),
        }
    }
    assert_eq!(maxima.len(), PARTITIONS as usize, "every partition has records");
    let watermark = maxima.values().min().unwrap() - DELAY_S;
    let mut expected = Expected::default();
    for &(k, v, at) in &on_time {
        *expected.on_time.entry((k, v, at)).or_default() += 1;
        let Some(t) = at else { continue };
        let start = t.div_euclid(5) * 5;
        if start + 5 <= watermark {
            let e = expected.tumbling.entry((k, start, start + 5)).or_insert((0, 0, i64::MAX, i64::MIN));
            *e = (e.0 + 1, e.1 + v, e.2.min(v), e.3.max(v));
        }
        for hop_start in [t.div_euclid(2) * 2 - 4, t.div_euclid(2) * 2 - 2, t.div_euclid(2) * 2] {
            if v % 3 != 0 && hop_start + 6 <= watermark {
                *expected.hopping.entry(hop_start + 6).or_default() += 1;
            }
        }
    }
    let mut open = Open::default();
    for ((k, v, _), start, end) in sessions_of(&on_time, 2, |k| k) {
        if end <= watermark {
            let e = expected.sessions.entry((k, start, end)).or_default();
            *e = (e.0 + 1, e.1 + v);
        } else {
            open.session_rows += 1;
        }
    }
    let open_windows: std::collections::BTreeSet<(i64, i64)> = on_time
        .iter()
        .filter_map(|&(k, _, at)| at.map(|t| (k, t.div_euclid(5) * 5)))
        .filter(|(_, start)| start + 5 > watermark)
        .collect();
    open.windows = open_windows.len();
    for (&(k, start, end), &(n, _, _, _)) in &expected.tumbling {
        let e = expected.busiest.entry(end).or_default();
        *e = (e.0.max(n), e.1 + 1);
        let top = expected.tumbling.iter().filter(|((k2, s2, _), _)| k2 % 3 == k % 3 && *s2 == start);
        expected.window_join.insert((k, start), (n, top.map(|(_, t)| t.3).max().unwrap()));
    }
    for ((k, v, at), start, end) in sessions_of(&on_time, 3, |k| k % 4) {
        if end <= watermark && v < 50 {
            *expected.session_rows.entry((k, v, at.unwrap(), start, end)).or_default() += 1;
        }
    }
    (expected, late, open)
}

/// Seconds after midnight of a view's "2024-01-01 HH:MM:SS".
fn seconds(value: &serde_json::Value) -> Option<i64> {
    let text = value.as_str()?;
    let time = text.strip_prefix("2024-01-01 ").unwrap_or_else(|| panic!("a time on 2024-01-01, not {text}"));
    let parts: Vec<i64> = time.split(':').map(|p| p.parse().unwrap()).collect();
    Some(parts[0] * 3600 + parts[1] * 60 + parts[2])
}

fn views(dir: &Path) -> Expected {
    let mut actual = Expected::default();
    for (row, n) in read_view(dir, "tumbling").unwrap().rows {
        assert_eq!(n, 1, "a window once: {row}");
        let key =
            (row["k"].as_i64().unwrap(), seconds(&row["window_start"]).unwrap(), seconds(&row["window_end"]).unwrap());
        let values = (
            row["n"].as_i64().unwrap(),
            row["s"].as_i64().unwrap(),
            row["lo"].as_i64().unwrap(),
            row["hi"].as_i64().unwrap(),
        );
        assert!(actual.tumbling.insert(key, values).is_none(), "one row per window: {row}");
    }
    for (row, n) in read_view(dir, "hopping").unwrap().rows {
        assert_eq!(n, 1, "a window once: {row}");
        actual.hopping.insert(seconds(&row["window_end"]).unwrap(), row["n"].as_i64().unwrap());
    }
    for (row, n) in read_view(dir, "sessions").unwrap().rows {
        assert_eq!(n, 1, "a session once: {row}");
        let key =
            (row["k"].as_i64().unwrap(), seconds(&row["window_start"]).unwrap(), seconds(&row["window_end"]).unwrap());
        let values = (row["n"].as_i64().unwrap(), row["s"].as_i64().unwrap());
        assert!(actual.sessions.insert(key, values).is_none(), "one row per session: {row}");
    }
    for (row, n) in read_view(dir, "session_rows").unwrap().rows {
        let key = (
            row["k"].as_i64().unwrap(),
            row["v"].as_i64().unwrap(),
            seconds(&row["at"]).unwrap(),
            seconds(&row["window_start"]).unwrap(),
            seconds(&row["window_end"]).unwrap(),
        );
        *actual.session_rows.entry(key).or_default() += n;
    }
    for (row, n) in read_view(dir, "busiest").unwrap().rows {
        assert_eq!(n, 1, "a window once: {row}");
        let values = (row["most"].as_i64().unwrap(), row["keys"].as_i64().unwrap());
        assert!(actual.busiest.insert(seconds(&row["window_end"]).unwrap(), values).is_none(), "one row: {row}");
    }
    for (row, n) in read_view(dir, "window_join").unwrap().rows {
        assert_eq!(n, 1, "a window once: {row}");
        let key = (row["k"].as_i64().unwrap(), seconds(&row["window_start"]).unwrap());
        let values = (row["n"].as_i64().unwrap(), row["top"].as_i64().unwrap());
        assert!(actual.window_join.insert(key, values).is_none(), "one row per window: {row}");
    }
    for (row, n) in read_view(dir, "on_time").unwrap().rows {
        let key = (row["k"].as_i64().unwrap(), row["v"].as_i64().unwrap(), seconds(&row["at"]));
        *actual.on_time.entry(key).or_default() += n;
    }
    actual
}

/// The entries of each keyspace whose name starts with `prefix` and names `view`.
fn entries(dir: &Path, prefix: &str, view: &str) -> Vec<usize> {
    use millpond_dataflow::state::{RocksStore, StateStore};
    let store = RocksStore::open(dir.join("state")).unwrap();
    let names = store.keyspace_names().unwrap();
    let mine = names.iter().filter(|n| n.starts_with(&format!("{prefix}.{view}.")));
    let count = |name: &String| {
        let mut count = 0;
        store
            .scan_prefix(store.keyspace(name).unwrap(), b"", &mut |_, _| {
                count += 1;
                true
            })
            .unwrap();
        count
    };
    mine.map(count).collect()
}

/// Closed windows and sessions leave nothing in state: the closing
/// aggregate holds the open windows, the closing SESSION the rows of open
/// sessions, and the window join (whose inputs emit closed windows only)
/// nothing once an epoch ends.
fn check_state(dir: &Path, open: &Open) {
    assert_eq!(entries(dir, "closing", "tumbling"), vec![open.windows], "one entry per open window");
    let session_entries = entries(dir, "sessions", "sessions");
    assert_eq!(session_entries.len(), 1, "one session operator");
    // Rows equal in the columns kept (k, v, at) folded in one epoch share an entry.
    assert!(session_entries[0] <= open.session_rows, "{session_entries:?} entries, {} open rows", open.session_rows);
    assert_eq!(session_entries[0] == 0, open.session_rows == 0, "open sessions have rows in state");
    assert_eq!(entries(dir, "closing_join", "window_join"), vec![0], "a window join keeps no closed window");
}

fn run_seed(seed: u64) {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    Topics::open(dir)
        .unwrap()
        .ensure(TOPIC, TopicSpec { partitions: PARTITIONS, compacted: false, compaction_bounded: false })
        .unwrap();
    let mut session = Session::open(dir).unwrap();
    session.execute(DEFINITIONS, Some("event_time.sql"), true).unwrap();
    let catalog = session.compile().unwrap();
    drop(session);
    let (mut windows_seen, mut sessions_seen, mut late) = (0, (0, 0), 0);
    for (phase, events) in phases(&mut rng).into_iter().enumerate() {
        Topics::open(dir).unwrap().append(TOPIC, events.into_iter().map(record).collect()).unwrap();
        let epoch_records = 1 + rng.below(60);
        let config =
            RuntimeConfig::new(dir).epoch_interval_ms(5).epoch_records_max(epoch_records).stop_when_caught_up(true);
        millpond_sql::run(config, catalog.clone()).unwrap();
        let ((expected, late_now, open), actual) = (oracle(dir), views(dir));
        late = late_now;
        assert_eq!(actual, expected, "seed {seed}, phase {phase} (epochs of {epoch_records} records)");
        check_state(dir, &open);
        windows_seen = expected.tumbling.len();
        sessions_seen = (expected.sessions.len(), expected.session_rows.len());
    }
    assert!(windows_seen > 50, "seed {seed}: the run closes windows ({windows_seen})");
    assert!(sessions_seen.0 > 50 && sessions_seen.1 > 100, "seed {seed}: the run closes sessions ({sessions_seen:?})");
    // The dead-letter view writes each late record once, across runs.
    let letters = Topics::open(dir).unwrap().read_all("ev.dead-letter").map_or(0, |l| l.len()) as u64;
    assert_eq!(letters, late, "seed {seed}: one letter per late record");
    assert!(letters > 10, "seed {seed}: some records are late ({letters})");
}

#[test]
fn watermarked_windows_match_a_recomputation() {
    let seeds = std::env::var("MILLPOND_EVENT_TIME_SEEDS").unwrap_or_else(|_| "1,2".to_owned());
    for seed in seeds.split(',').map(|s| s.trim().parse::<u64>().expect("a seed")) {
        run_seed(seed);
    }
}

/// `INCLUDE TIMESTAMP AS col`: the record's timestamp (here the append's),
/// in views and one-off queries, with a WATERMARK on it (ingestion time:
/// every window closes in order, no record is late).
#[test]
fn include_timestamp_is_the_records_timestamp() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let mut session = Session::open(dir).unwrap();
    let definitions = "
        CREATE SOURCE arrivals (k BIGINT, WATERMARK FOR seen AS seen) FROM TOPIC 'arr' FORMAT JSON
            INCLUDE TIMESTAMP AS seen;
        CREATE MATERIALIZED VIEW stamped AS SELECT k, ROUND(EXTRACT(EPOCH FROM seen) * 1000) AS ms FROM arrivals;
        CREATE MATERIALIZED VIEW per_ms AS SELECT window_start, COUNT(*) AS n
            FROM TUMBLE(arrivals, seen, INTERVAL '1' MILLISECOND) GROUP BY window_start;";
    session.execute(definitions, Some("stamped.sql"), true).unwrap();
    let catalog = session.compile().unwrap();
    drop(session);
    let millis = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let before_ms = millis();
    for k in 0..20 {
        let value = format!(r#"{{"k": {k}, "seen": "1999-01-01 00:00:00"}}"#).into_bytes();
        let record = TopicRecord { key: None, value: Some(value), headers: vec![] };
        Topics::open(dir).unwrap().append("arr", vec![record]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let after_ms = millis();
    let stored: Vec<i64> = Topics::open(dir).unwrap().read_all("arr").unwrap().iter().map(|r| r.timestamp_ms).collect();
    let config = RuntimeConfig::new(dir).epoch_interval_ms(5).stop_when_caught_up(true);
    millpond_sql::run(config, catalog).unwrap();
    let mut seen: Vec<(i64, i64)> = read_view(dir, "stamped")
        .unwrap()
        .rows
        .into_iter()
        .map(|(row, _)| (row["k"].as_i64().unwrap(), row["ms"].as_f64().unwrap() as i64))
        .collect();
    seen.sort();
    assert_eq!(seen.len(), 20, "every record is on time: {seen:?}");
    for ((k, ms), stored_ms) in seen.iter().zip(&stored) {
        assert!((before_ms..=after_ms).contains(stored_ms), "record {k}: {stored_ms} not in {before_ms}..={after_ms}");
        assert_eq!(ms, stored_ms, "record {k}: the column is the record's timestamp, not the JSON field");
    }
    // A one-off query reads it too.
    let session = Session::open(dir).unwrap();
    let query = session.query("SELECT COUNT(DISTINCT seen) AS stamps, COUNT(*) AS n, MIN(seen) > TIMESTAMP '2020-01-01' AS now FROM arrivals").unwrap();
    let answer = query.run(&BTreeMap::new()).unwrap();
    let distinct = stored.iter().collect::<std::collections::BTreeSet<_>>().len() as i64;
    assert_eq!(
        format!("{:?}", answer),
        format!(
            "{:?}",
            vec![vec![
                millpond_sql::Value::Int(distinct),
                millpond_sql::Value::Int(20),
                millpond_sql::Value::Bool(true)
            ]]
        )
    );
    // Windows close as the append times pass them: all but the last millisecond's.
    let counted: i64 = read_view(dir, "per_ms").unwrap().rows.iter().map(|(row, _)| row["n"].as_i64().unwrap()).sum();
    let last = stored.iter().filter(|t| **t == *stored.iter().max().unwrap()).count() as i64;
    assert_eq!(counted, 20 - last, "closed windows hold every record but the last millisecond's");
}

/// A partition first read after the watermark passed its records' times:
/// its records are on time by its own order, but their windows closed
/// already, so the closing aggregate drops them and counts them
/// (`RunStats::closed_window_drops`), never silently; a view that does not
/// close windows keeps them.
#[test]
fn records_of_a_partition_read_after_their_windows_closed_are_counted() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let spec = TopicSpec { partitions: 1, compacted: false, compaction_bounded: false };
    Topics::open(dir).unwrap().ensure(TOPIC, spec).unwrap();
    let mut session = Session::open(dir).unwrap();
    session.execute(DEFINITIONS, Some("event_time.sql"), true).unwrap();
    let catalog = session.compile().unwrap();
    drop(session);
    let config = || RuntimeConfig::new(dir).epoch_interval_ms(5).stop_when_caught_up(true);
    let first: Vec<Event> = (0..100).map(|i| (i % KEYS, 1, Some(36_000 + i))).collect();
    Topics::open(dir).unwrap().append(TOPIC, first.into_iter().map(record).collect()).unwrap();
    let stats = millpond_sql::run(config(), catalog.clone()).unwrap();
    assert_eq!(stats.closed_window_drops, 0, "one partition, in order: nothing falls in a closed window");
    // A second partition, and records at 36 010 s (window [36 010, 36 015)
    // closed: the watermark is 36 099 - 3); v = 3 keeps them out of `hopping`.
    let topics = Topics::open(dir).unwrap();
    topics.add_partitions(TOPIC, 2).unwrap();
    let old: Vec<Event> = (0..40).map(|k| (k, 3, Some(36_010))).collect();
    topics.append(TOPIC, old.into_iter().map(record).collect()).unwrap();
    let in_new_partition = topics.read_all(TOPIC).unwrap().iter().filter(|r| r.partition == 1).count() as u64;
    drop(topics);
    assert!(in_new_partition > 0, "some keys route to the new partition");
    let stats = millpond_sql::run(config(), catalog.clone()).unwrap();
    assert_eq!(
        stats.closed_window_drops,
        6 * in_new_partition,
        "each record of the new partition, in its one tumbling window of each of the four closing aggregates \
         (tumbling, busiest's inner one, window_join's two) and in each SESSION view's sessions"
    );
    let kept = read_view(dir, "on_time").unwrap().rows.iter().filter(|(row, _)| row["v"].as_i64() == Some(3)).count();
    assert_eq!(kept as u64, in_new_partition, "a view without windows keeps the new partition's records");
    // Both partitions move on: windows close again, and the window closed
    // before the restarts is not emitted a second time.
    let later: Vec<Event> = (0..200).map(|i| (i % KEYS, 1, Some(36_100 + i))).collect();
    Topics::open(dir).unwrap().append(TOPIC, later.into_iter().map(record).collect()).unwrap();
    let stats = millpond_sql::run(config(), catalog).unwrap();
    assert_eq!(stats.closed_window_drops, 0, "the new partition is on time now");
    let mut windows = BTreeMap::new();
    for (row, n) in read_view(dir, "tumbling").unwrap().rows {
        assert_eq!(n, 1, "a window once: {row}");
        let key = (row["k"].as_i64(), seconds(&row["window_start"]), seconds(&row["window_end"]));
        assert!(windows.insert(key, row["s"].as_i64()).is_none(), "one row per window: {row}");
    }
    assert!(windows.len() > 40, "windows closed in every phase ({})", windows.len());
    assert!(windows.values().all(|s| *s < Some(300)), "no window holds the dropped records (v = 3)");
}
