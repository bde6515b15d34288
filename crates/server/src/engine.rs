//! The engine: one process's data directory, shared by its SQL session, the
//! runtime that maintains the catalog's materialized views, and every client.
//!
//! Invariants:
//! - The data directory's log is opened once, by the engine; the session
//!   and every run of the runtime use that one log (so `INSERT` works while
//!   views run, and no other process can open the directory meanwhile).
//! - Statements run one batch at a time (the session's lock); a batch is
//!   applied whole or not at all (the session's own rule).
//! - When a batch changes what the runtime maintains (the compiled views, or
//!   the sources and tables whose dead letters it keeps), the runtime is
//!   stopped at its next commit and started again on the new catalog, in
//!   this process: every view resumes from its committed state (nothing is
//!   recomputed), and readers of views (snapshots, subscribers) read the
//!   committed changelogs, which the restart leaves as they are, so they
//!   miss nothing. A batch of DML only (rows of tables) restarts nothing:
//!   the running views read the tables' topics.
//! - A run that fails is reported (`Engine::status`), not retried in a
//!   loop; the next catalog change, or `Engine::restart`, starts it again.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use millpond_dataflow::{RunStats, RuntimeConfig, StateBackend, Topics};
use millpond_sql::{CompiledCatalog, CompiledSource, Outcome, Session};

use crate::error::{Error, Result};

/// What a view's readers have done, as of the last commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViewStat {
    pub read_records: u64,
    pub lag_records: u64,
}

/// Table topics (`table.NAME`): what read-your-writes tracks.
const TABLE_TOPIC_PREFIX: &str = "table.";

/// Per table topic written, its end offset after the write: a read that
/// must see the write waits until its views' readers are past it.
pub type Writes = std::collections::BTreeMap<String, u64>;

/// Per view, the topics it reads (`Engine::topics_read`).
pub type Reads = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// How the engine runs its views.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub data_dir: PathBuf,
    pub workers: usize,
    pub epoch_interval_ms: u64,
    pub state: StateBackend,
    /// Each checkpoint commit waits this long first (fault and timing
    /// tests: a view's first commit comes no sooner); 0 in production.
    pub commit_delay_ms: u64,
    /// How old a commit must be before compaction may take the views'
    /// changelogs up to it (held back by durable subscriptions' positions).
    pub changelog_compaction_lag_ms: u64,
    /// Segment size of the views' changelog topics (compaction rewrites
    /// closed segments only).
    pub changelog_segment_bytes: u64,
    /// The nice value of the fan-out hubs' threads (0: the engine's;
    /// [`crate::fanout_nice`] for a server with niced client threads).
    pub fanout_nice: i32,
}

impl EngineConfig {
    /// One worker, 1 s epochs, RocksDB state.
    pub fn new(data_dir: impl Into<PathBuf>) -> EngineConfig {
        let data_dir = data_dir.into();
        let runtime = RuntimeConfig::new(&data_dir);
        EngineConfig {
            data_dir,
            workers: 1,
            epoch_interval_ms: 1000,
            state: StateBackend::RocksDb,
            commit_delay_ms: 0,
            changelog_compaction_lag_ms: runtime.changelog_compaction_lag_ms,
            changelog_segment_bytes: runtime.sink_segment_bytes,
            fanout_nice: 0,
        }
    }
}

/// What the runtime is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunState {
    /// Maintaining these views (sorted).
    Running { views: Vec<String> },
    /// No run: the catalog has no materialized view.
    Idle,
    /// The last run failed with this error; it starts again with the next
    /// catalog change or `Engine::restart`.
    Failed { error: String },
}

/// The identity of what a run maintains: a restart is due when it changes.
type RunKey = (Vec<(String, u64)>, Vec<CompiledSource>);

fn run_key(compiled: &CompiledCatalog) -> RunKey {
    let views = compiled.views.iter().map(|v| (v.name.clone(), v.fingerprint)).collect();
    (views, compiled.sources.clone())
}

/// The runtime's current run, on its own thread.
#[derive(Debug, Default)]
struct Runner {
    thread: Option<JoinHandle<std::result::Result<RunStats, String>>>,
    stop: Arc<AtomicBool>,
    key: Option<RunKey>,
    views: Vec<String>,
    failure: Option<String>,
}

/// A data directory, open and served by this process.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    topics: Topics,
    session: Mutex<Session>,
    runner: Mutex<Runner>,
    /// The durable subscriptions (their holds go to every run).
    pub(crate) subscriptions: crate::subscription::Subscriptions,
    /// The catalog's Kafka sinks, running.
    sinks: crate::sinks::Sinks,
    /// The published checkpoint, read once for every subscriber.
    pub(crate) commits: crate::commits::Commits,
    /// Changelog folds at once: readers opened AS OF an epoch, and the
    /// hubs' snapshot reads (each folds its view's changelog).
    pub(crate) opens: Arc<tokio::sync::Semaphore>,
    /// One shared changelog reader per view with subscribers.
    pub(crate) hubs: crate::fanout::Hubs,
    /// The rows one-off SELECTs read, brought forward by each query.
    pub(crate) view_cache: crate::view_cache::ViewCache,
    /// Starts the runtime's runs and the hubs at the opener's priority
    /// (a run restarted by a client's statement would otherwise inherit
    /// the client thread's nice value, and the dataflow run at the wire's).
    spawner: Arc<crate::priority::Spawner>,
    /// Every run's commit-path durations (one set across restarts).
    timings: Arc<millpond_dataflow::CommitTimings>,
    /// Every run's counters (summed across restarts).
    counters: Arc<millpond_dataflow::RunCounters>,
}

/// Subscriptions opened at once: each open folds the view's changelog to
/// its snapshot epoch, so more at once only raises the memory peak.
pub(crate) const SUBSCRIPTION_OPENS_MAX: usize = 2;

/// Why clients may not write (nor create) `topic`, if they may not: only
/// the server writes internal topics, only DML a table's, only the runtime
/// a view's changelog or dead-letter topic.
pub(crate) fn client_write_refusal(topic: &str) -> Option<&'static str> {
    if topic.starts_with("__") {
        Some("an internal topic is written by the server only")
    } else if topic.starts_with(TABLE_TOPIC_PREFIX) {
        Some("a table's topic is written by INSERT, UPDATE and DELETE only")
    } else if millpond_dataflow::is_sink_topic_name(topic) {
        Some("a view's changelog or dead-letter topic is written by the runtime only")
    } else {
        None
    }
}

impl Engine {
    /// Opens the data directory (holding its lock), loads the catalog and
    /// starts maintaining its views.
    pub fn open(config: EngineConfig) -> Result<Arc<Engine>> {
        if config.workers == 0 || config.epoch_interval_ms == 0 {
            return Err(Error::Config("workers and epoch_interval_ms must be at least 1".into()));
        }
        std::fs::create_dir_all(&config.data_dir).map_err(|source| Error::Io {
            action: "creating",
            path: config.data_dir.display().to_string(),
            source,
        })?;
        let topics = Topics::open(&config.data_dir)?;
        let session = Session::open_on(topics.clone())?;
        let subscriptions = crate::subscription::Subscriptions::load(&topics)?;
        let commits = crate::commits::Commits::watch(&config.data_dir).map_err(|source| Error::Io {
            action: "watching the checkpoint of",
            path: config.data_dir.display().to_string(),
            source,
        })?;
        let spawner = Arc::new(crate::priority::Spawner::new());
        let data_dir = config.data_dir.clone();
        let engine = Arc::new(Engine {
            hubs: crate::fanout::Hubs::new(spawner.clone(), config.fanout_nice),
            view_cache: crate::view_cache::ViewCache::default(),
            spawner,
            commits,
            opens: Arc::new(tokio::sync::Semaphore::new(SUBSCRIPTION_OPENS_MAX)),
            timings: Arc::default(),
            counters: Arc::default(),
            config,
            topics,
            session: Mutex::new(session),
            runner: Mutex::new(Runner::default()),
            subscriptions,
            sinks: crate::sinks::Sinks::new(data_dir),
        });
        engine.sync_runner(&engine.session(), true)?;
        Ok(engine)
    }

    /// Each Kafka sink of the catalog and, if it stopped with one, its error.
    pub fn sink_status(&self) -> Vec<(String, Option<String>)> {
        self.sinks.status()
    }

    /// The open log's topics (what clients read and write through it).
    pub(crate) fn topics(&self) -> &Topics {
        &self.topics
    }

    /// The durations of the runtime's commit path, since the engine opened.
    pub fn commit_timings(&self) -> &millpond_dataflow::CommitTimings {
        &self.timings
    }

    /// What the runtime's runs counted, since the engine opened.
    pub fn run_counters(&self) -> &millpond_dataflow::RunCounters {
        &self.counters
    }

    /// The last committed snapshots of `views`, at one epoch (what
    /// `INSERT ... SELECT` reads), waiting up to the default statement wait
    /// for a view's first commit.
    fn view_snapshots(
        &self,
        views: &[&str],
    ) -> std::result::Result<std::collections::BTreeMap<String, Arc<millpond_dataflow::RawSnapshot>>, String> {
        use crate::view_cache::ReadError;
        let wait_ms = crate::pg::VIEW_READY_WAIT_MS;
        self.view_cache.rows(self.data_dir(), views, wait_ms).map_err(|error| match error {
            ReadError::NotCommitted(view) => {
                format!("view \"{view}\" has not committed its first epoch within {wait_ms} ms")
            }
            ReadError::Inconsistent(epochs) => {
                format!("could not read the views at one epoch ({epochs}); run it again")
            }
            ReadError::Failed(view, e) => format!("reading view \"{view}\": {e}"),
        })
    }

    /// The data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.config.data_dir
    }

    /// Executes the statements of `sql` as one batch; restarts the runtime
    /// if the batch changed what it maintains.
    pub fn execute(&self, sql: &str) -> Result<Vec<Outcome>> {
        let mut session = self.session();
        let outcomes = session.execute_reading(sql, None, false, &|views| self.view_snapshots(views))?;
        self.sync_runner(&session, false)?;
        Ok(outcomes)
    }

    /// [`Engine::execute`], and what a read must wait for to see the batch's
    /// writes: each table topic the batch wrote, with its end offset after it.
    pub fn execute_tracked(&self, sql: &str) -> Result<(Vec<Outcome>, Writes)> {
        let mut session = self.session();
        let before = self.table_ends()?;
        let outcomes = session.execute_reading(sql, None, false, &|views| self.view_snapshots(views))?;
        let after = self.table_ends()?;
        self.sync_runner(&session, false)?;
        let written = after.into_iter().filter(|(topic, end)| before.get(topic) != Some(end)).collect();
        Ok((outcomes, written))
    }

    /// The end offset of every table topic (one partition each).
    fn table_ends(&self) -> Result<Writes> {
        let mut ends = Writes::new();
        for topic in self.topics.list().into_iter().filter(|t| t.starts_with(TABLE_TOPIC_PREFIX)) {
            ends.insert(topic.clone(), self.topics.end_offset(&topic, 0)?);
        }
        Ok(ends)
    }

    /// The last committed checkpoint, as readers see it (None before the first).
    pub fn committed(&self) -> Result<Option<millpond_dataflow::CheckpointMeta>> {
        Ok(millpond_dataflow::CheckpointMeta::read_published(&self.config.data_dir)?)
    }

    /// Per view of `meta`: how many records its readers have read (their
    /// committed next offsets, summed) and how many are left before their
    /// topics' high watermarks.
    pub fn view_stats(&self, meta: &millpond_dataflow::CheckpointMeta) -> std::collections::BTreeMap<String, ViewStat> {
        let mut stats = std::collections::BTreeMap::new();
        for view in meta.views.keys() {
            let mut stat = ViewStat::default();
            let prefix = format!("{view}.");
            for (reader, topic) in meta.readers.iter().filter(|(reader, _)| reader.starts_with(&prefix)) {
                for (partition, next) in meta.sources.get(reader).into_iter().flatten() {
                    let end = self.topics.end_offset(topic, *partition).unwrap_or(*next);
                    stat.read_records += next;
                    stat.lag_records += end.saturating_sub(*next);
                }
            }
            stats.insert(view.clone(), stat);
        }
        stats
    }

    /// Time since the last commit was seen, and the interval before it.
    pub fn commit_timing(&self) -> (std::time::Duration, Option<std::time::Duration>) {
        let timing = self.commits.timing();
        (timing.last.map_or(std::time::Duration::ZERO, |last| last.elapsed()), timing.interval)
    }

    /// Per materialized view of `views`, the topics it reads (a view that
    /// no longer binds reads none): what [`Engine::covers`] checks.
    pub fn topics_read(&self, views: &[&str]) -> Reads {
        let session = self.session();
        views.iter().map(|view| ((*view).to_owned(), session.topics_read(view).unwrap_or_default())).collect()
    }

    /// Whether every view of `reads` has committed an epoch whose readers of
    /// each written topic are past the write (`written`): its committed
    /// contents then reflect the write. A view that reads none of the
    /// written topics is covered once it has committed at all.
    pub fn covers(&self, reads: &Reads, written: &Writes) -> Result<bool> {
        if written.is_empty() || reads.is_empty() {
            return Ok(true);
        }
        let Some(meta) = millpond_dataflow::CheckpointMeta::read_published(&self.config.data_dir)? else {
            return Ok(false);
        };
        Ok(covered(&meta, reads, written))
    }

    /// Executes a definition file as one batch, each of its DML statements
    /// once per data directory (as `millpond run FILE.sql` does).
    pub fn execute_file(&self, sql: &str, file: &str) -> Result<Vec<Outcome>> {
        let mut session = self.session();
        let outcomes = session.execute_reading(sql, Some(file), true, &|views| self.view_snapshots(views))?;
        self.sync_runner(&session, false)?;
        Ok(outcomes)
    }

    /// The names and kinds of the catalog's objects.
    pub fn objects(&self) -> Vec<(String, &'static str)> {
        self.session().objects()
    }

    /// The kind and the defining statement of object `name`.
    pub fn definition(&self, name: &str) -> Option<(&'static str, String)> {
        self.session().definition(name)
    }

    /// Describes one statement with `$n` placeholders (the extended protocol).
    pub fn describe(&self, sql: &str) -> Result<millpond_sql::Description> {
        Ok(self.session().describe(sql)?)
    }

    /// Appends `records` to `topic` (routed by key to its partitions;
    /// synced; a missing topic is created with 4 partitions): what a feeder
    /// of the server's own topics (the live demo) writes through.
    pub fn append(&self, topic: &str, records: Vec<millpond_dataflow::TopicRecord>) -> Result<()> {
        if !self.topics.exists(topic) {
            let spec = millpond_dataflow::TopicSpec { partitions: 4, compacted: false, compaction_bounded: false };
            self.topics.ensure(topic, spec)?;
        }
        Ok(self.topics.append(topic, records)?)
    }

    /// Appends `records` to `topic` for a client (`COPY topic FROM STDIN`):
    /// the topic must exist and be one that the outside writes (a source's),
    /// not a table's (INSERT writes those), a view's changelog or
    /// dead-letter topic, or an internal one.
    pub fn produce(&self, topic: &str, records: Vec<millpond_dataflow::TopicRecord>) -> Result<()> {
        if let Some(reason) = client_write_refusal(topic) {
            return Err(Error::TopicRefused { topic: topic.to_owned(), reason: reason.to_owned() });
        }
        if !self.topics.exists(topic) {
            return Err(Error::NoTopic(topic.to_owned()));
        }
        Ok(self.topics.append(topic, records)?)
    }

    /// The catalog source that reads `topic`, if one does.
    pub(crate) fn source_reading(&self, topic: &str) -> Option<String> {
        let compiled = self.session().compile().ok()?;
        compiled.sources.into_iter().find(|source| source.topic == topic).map(|source| source.name)
    }

    /// Where readers of `topic`'s `partition` must stop: the end of what the
    /// runtime has committed for a view's changelog or dead-letter topic
    /// (its tail past that may be cut when the runtime restarts, and
    /// reused), the high watermark for any other topic.
    pub(crate) fn readable_end(&self, topic: &str, partition: u32) -> millpond_dataflow::Result<u64> {
        let high = self.topics.end_offset(topic, partition)?;
        if !millpond_dataflow::is_sink_topic_name(topic) {
            return Ok(high);
        }
        let commit = self.commits.subscribe().borrow().clone();
        let committed = commit.and_then(|meta| meta.sinks.get(topic).copied()).unwrap_or(0);
        Ok(if partition == 0 { committed.min(high) } else { 0 })
    }

    /// The records `topic` has held, over all its partitions (its end
    /// offsets summed; 0 if there is no such topic).
    pub fn records_in(&self, topic: &str) -> Result<u64> {
        if !self.topics.exists(topic) {
            return Ok(0);
        }
        let mut total = 0;
        for partition in 0..self.topics.partitions(topic)? {
            total += self.topics.end_offset(topic, partition)?;
        }
        Ok(total)
    }

    /// Binds a one-off query against the catalog as it is now.
    pub fn query(&self, sql: &str, context: &millpond_sql::SystemContext) -> Result<millpond_sql::Query> {
        Ok(self.session().query_in(sql, context)?)
    }

    /// The columns of materialized view `name` (None if there is none).
    pub fn view_columns(&self, name: &str) -> Option<Vec<(String, millpond_sql::Type)>> {
        let compiled = self.session().compile().ok()?;
        compiled.views.into_iter().find(|view| view.name == name).map(|view| view.columns)
    }

    /// What the runtime is doing now.
    pub fn status(&self) -> RunState {
        let mut runner = self.runner();
        reap_finished(&mut runner);
        if let Some(error) = &runner.failure {
            return RunState::Failed { error: error.clone() };
        }
        // A run without views only applies drops and ends: idle as well.
        match &runner.thread {
            Some(_) if !runner.views.is_empty() => RunState::Running { views: runner.views.clone() },
            _ => RunState::Idle,
        }
    }

    /// Starts the runtime again on the current catalog (after a failure).
    pub fn restart(&self) -> Result<()> {
        let session = self.session();
        self.sync_runner(&session, true)
    }

    /// Stops the runtime at its next commit and waits for it.
    pub fn shutdown(&self) -> Result<()> {
        let mut runner = self.runner();
        stop(&mut runner);
        match runner.failure.take() {
            Some(error) => Err(Error::Run(error)),
            None => Ok(()),
        }
    }

    fn session(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn runner(&self) -> MutexGuard<'_, Runner> {
        self.runner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes the run match the catalog: restarts it if what it maintains
    /// changed (or `force`). Called with the session locked, so runs start
    /// in catalog order.
    fn sync_runner(&self, session: &Session, force: bool) -> Result<()> {
        let compiled = session.compile()?;
        self.sinks.sync(&compiled.sinks);
        let key = run_key(&compiled);
        let mut runner = self.runner();
        reap_finished(&mut runner);
        if !force && runner.key.as_ref() == Some(&key) {
            return Ok(());
        }
        stop(&mut runner);
        runner.failure = None;
        runner.views = compiled.views.iter().map(|v| v.name.clone()).collect();
        runner.views.sort();
        runner.key = Some(key);
        // A catalog without views still runs once: that run drops what the
        // previous one maintained (changelogs, state) and ends.
        let stop_flag = Arc::new(AtomicBool::new(false));
        let mut config = RuntimeConfig::new(&self.config.data_dir)
            .workers(self.config.workers)
            .epoch_interval_ms(self.config.epoch_interval_ms)
            .state(self.config.state)
            .stop(stop_flag.clone())
            .changelog_holds(self.subscriptions.holds.clone())
            .on_commit(self.commits.bell())
            .timings(self.timings.clone())
            .counters(self.counters.clone())
            .changelog_compaction_lag_ms(self.config.changelog_compaction_lag_ms)
            .sink_segment_bytes(self.config.changelog_segment_bytes);
        config.commit_delay_ms = self.config.commit_delay_ms;
        let topics = self.topics.clone();
        let thread = self
            .spawner
            .spawn("millpond-runtime".into(), move || {
                millpond_sql::run_on(&topics, config, compiled).map_err(|e| e.to_string())
            })
            .map_err(|source| Error::Io { action: "spawning", path: "the runtime thread".into(), source })?;
        runner.thread = Some(thread);
        runner.stop = stop_flag;
        Ok(())
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        stop(&mut self.runner());
    }
}

/// Stops the run (if any) at its next commit and waits for it; records a failure.
fn stop(runner: &mut Runner) {
    runner.stop.store(true, Ordering::Relaxed);
    if let Some(thread) = runner.thread.take() {
        finished(runner, thread);
    }
}

/// Takes a run that ended on its own (caught up on an empty catalog, or failed).
fn reap_finished(runner: &mut Runner) {
    if runner.thread.as_ref().is_some_and(JoinHandle::is_finished) {
        let thread = runner.thread.take().expect("checked");
        finished(runner, thread);
    }
}

fn finished(runner: &mut Runner, thread: JoinHandle<std::result::Result<RunStats, String>>) {
    match thread.join() {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => runner.failure = Some(error),
        Err(_) => runner.failure = Some("the runtime thread panicked".into()),
    }
}

/// Whether the committed checkpoint `meta` covers `written` for every view
/// of `reads`: each view has committed (a view just created has not: its
/// first committed epoch may precede the writes), and for each written
/// topic it reads, it has a reader of that topic in the checkpoint and
/// each such reader has read past the write. A reader appears in the
/// checkpoint only once it has read something, so a view whose epoch
/// committed before one of its readers started has not covered that
/// reader's writes (the race that lost a UNION ALL branch's rows).
fn covered(meta: &millpond_dataflow::CheckpointMeta, reads: &Reads, written: &Writes) -> bool {
    reads.iter().all(|(view, topics)| {
        let prefix = format!("{view}.");
        let next_of = |reader: &str| meta.sources.get(reader).and_then(|partitions| partitions.get(&0)).copied();
        meta.views.contains_key(view)
            && written.iter().filter(|(topic, _)| topics.contains(*topic)).all(|(topic, end)| {
                let mut readers = meta.readers.iter().filter(|(r, t)| r.starts_with(&prefix) && *t == topic).peekable();
                readers.peek().is_some() && readers.all(|(reader, _)| next_of(reader).unwrap_or(0) >= *end)
            })
    })
}

#[cfg(test)]
mod tests {
    use millpond_dataflow::CheckpointMeta;

    use super::{Reads, Writes, covered};

    /// A checkpoint with view `total` reading table `t` through reader
    /// `total.f00d.t`, which has read up to `next`.
    fn meta(next: u64) -> CheckpointMeta {
        let mut meta = CheckpointMeta::default();
        meta.views.insert("total".into(), "view.total".into());
        meta.readers.insert("total.f00d.t".into(), "t".into());
        meta.sources.insert("total.f00d.t".into(), [(0, next)].into());
        meta
    }

    /// Views reading the named topics.
    fn reads(views: &[(&str, &[&str])]) -> Reads {
        views
            .iter()
            .map(|(view, topics)| ((*view).to_owned(), topics.iter().map(|t| (*t).to_owned()).collect()))
            .collect()
    }

    #[test]
    fn a_write_is_covered_once_every_view_read_past_it() {
        let written: Writes = [("t".to_owned(), 5)].into();
        let total = reads(&[("total", &["t"])]);
        assert!(!covered(&meta(4), &total, &written));
        assert!(covered(&meta(5), &total, &written));
        let elsewhere: Writes = [("other".to_owned(), 5)].into();
        assert!(covered(&meta(0), &total, &elsewhere), "a view that reads no written table is covered");
    }

    /// The race seen under load: a view created just before a write, read
    /// before its first commit, was taken as covered (no reader of it in
    /// the checkpoint) and read at a first epoch before the write.
    #[test]
    fn a_view_not_yet_committed_covers_nothing() {
        let written: Writes = [("t".to_owned(), 1)].into();
        assert!(!covered(&CheckpointMeta::default(), &reads(&[("total", &["t"])]), &written));
        assert!(!covered(&meta(5), &reads(&[("total", &["t"]), ("created_since", &["t"])]), &written));
    }

    /// The race seen in the sqllogictest corpus: a view over nine tables
    /// committed an epoch before its reader of the last table had read
    /// anything (so that reader was not in the checkpoint), and the read
    /// was taken as covered: the UNION ALL branch of that table was missing.
    #[test]
    fn a_reader_not_yet_in_the_checkpoint_covers_nothing() {
        let written: Writes = [("t".to_owned(), 5), ("u".to_owned(), 3)].into();
        let both = reads(&[("total", &["t", "u"])]);
        assert!(!covered(&meta(5), &both, &written), "no reader of u has committed");
        let mut with_u = meta(5);
        with_u.readers.insert("total.f00d.u".into(), "u".into());
        with_u.sources.insert("total.f00d.u".into(), [(0, 3)].into());
        assert!(covered(&with_u, &both, &written));
        let mut other_view = meta(5);
        other_view.readers.insert("totals.f00d.u".into(), "u".into());
        other_view.sources.insert("totals.f00d.u".into(), [(0, 3)].into());
        assert!(!covered(&other_view, &both, &written), "another view's reader does not count");
    }
}
