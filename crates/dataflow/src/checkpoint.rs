//! Barrier checkpoints: one atomic, synced state commit per finished epoch.
//!
//! Operators hand the state changes of an epoch, sources the offsets they
//! reached at its end, and sinks the end offsets of what they appended for
//! it, to [`Checkpoints`]. When the dataflow's frontier passes an epoch (no
//! operator on any worker can still produce or change anything at it),
//! worker 0 commits everything pending below the frontier:
//!
//! 1. sync every sink topic written for those epochs (the changelog bytes
//!    must be on disk before the checkpoint that points past them);
//! 2. write the state changes (but views') and the new [`CheckpointMeta`]
//!    in ONE RocksDB write batch, synced;
//! 3. publish the meta as `checkpoint.json` (atomic rename) for readers in
//!    other processes;
//! 4. hand the views' state writes, which their changelogs (synced in 1)
//!    already hold, to the state applier ([`crate::applier`]: its own
//!    thread, below the runtime's priority), which applies them in unsynced
//!    batches with their markers ([`crate::view_state`]) and then raises the
//!    committed epoch. The next commit waits for that apply before its
//!    synced batch (2), which makes it durable.
//!
//! Source offsets are kept per **reader**: a name for one position in one
//! topic (`Job::source` names its reader after the topic; `source_named`
//! lets one job read a topic with several readers). A reader with no
//! committed offsets is **fresh**: it reads each partition from its log
//! start offset. A state (an operator's or view's keyspace) that the
//! resumed checkpoint does not list is new; it is accepted only if every
//! reader in its lineage is fresh: then it sees all the retained input,
//! like a state built in a new data directory (where every reader is fresh).
//!
//! With `RuntimeConfig::drop_undeclared`, whatever the meta lists that this
//! run's job does not declare (readers, states, views, sink topics) is
//! removed from the meta and its keyspace deleted by the first commit of
//! the run (the same write batch); its sink topics are deleted from the log
//! after that commit returns. Sink topics left behind by a crash in between
//! are deleted at the next such startup.
//!
//! Invariants (asserted):
//! - committed epochs strictly increase;
//! - a sink's committed end offset never decreases;
//! - a reader reads one topic: the meta lists a topic for exactly the
//!   readers that have offsets, and it never changes;
//! - drops are committed by the first commit of a run (its write batch
//!   deletes the dropped keyspaces before anything else), and their topics
//!   are deleted only after it;
//! - `checkpoint.json` never runs ahead of the RocksDB commit (it is written
//!   after it, and rewritten from RocksDB at startup).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use millpond_log::Log;
use serde::{Deserialize, Serialize};

use crate::Epoch;
use crate::applier::{Applier, Apply};
use crate::error::{Error, Result};
use crate::state::{Keyspace, StateStore, WriteBatch};

/// The version of [`CheckpointMeta`] this build writes. It also reads
/// versions 2 (before named readers; every reader was named after its
/// topic), 3 (before changelog definitions), 4 (before dead-letter marks)
/// and 5 (before views' state was applied after the commit: a build that
/// reads at most 5 would trust a view's state that may lag its changelog,
/// so 6 keeps it out; the layout is 5's).
pub const CHECKPOINT_VERSION: u32 = 6;
const META_VERSION: u32 = CHECKPOINT_VERSION;
/// The version before [`CheckpointMeta::readers`].
const META_VERSION_WITHOUT_READERS: u32 = 2;
/// The version before [`CheckpointMeta::changelogs`].
const META_VERSION_WITHOUT_CHANGELOGS: u32 = 3;
/// The version before views' state was applied after the commit
/// ([`crate::view_state`]; same layout).
const META_VERSION_WITHOUT_APPLIED: u32 = 5;
/// The version before [`CheckpointMeta::dead_letters`].
const META_VERSION_WITHOUT_DEAD_LETTERS: u32 = 4;
const META_KEYSPACE: &str = "checkpoint";
const META_KEY: &[u8] = b"meta";
/// Name of the readers' copy of the last committed meta, in the data directory.
pub const CHECKPOINT_FILE: &str = "checkpoint.json";

/// What a committed checkpoint says. Stored (postcard) in the state store,
/// and as JSON in `checkpoint.json` for other processes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    pub version: u32,
    /// The last committed epoch (0: nothing committed yet).
    pub epoch: Epoch,
    /// Next offset to read, per reader and partition. A reader declared with
    /// `Job::source(topic, ..)` is named after its topic.
    pub sources: BTreeMap<String, BTreeMap<u32, u64>>,
    /// End offset of partition 0 of each sink topic (changelogs, dead letters).
    pub sinks: BTreeMap<String, u64>,
    /// Materialized views: name to changelog topic.
    pub views: BTreeMap<String, String>,
    /// Per changelog topic, the epoch (and its end offset) up to which the
    /// log may compact it. Readers refuse to start before that epoch: its
    /// changes may be gone. Trails the committed epoch by the compaction lag.
    pub compactable: BTreeMap<String, (Epoch, u64)>,
    /// The state of every stateful operator and view (its keyspace name).
    /// After a commit, a new one is accepted only if all its readers are
    /// fresh (its state would otherwise miss the input before their
    /// resumed offsets).
    pub states: BTreeSet<String>,
    /// The topic of every reader in `sources` (version 3): its offsets are
    /// offsets in that topic. Absent in version 2, where each reader is
    /// named after its topic.
    #[serde(default)]
    pub readers: BTreeMap<String, String>,
    /// Per view, what its changelog holds: which definition, since when, how
    /// many rows (version 4; before, filled in as definition "" since epoch
    /// 0 with an unknown row count).
    #[serde(default)]
    pub changelogs: BTreeMap<String, ViewChangelog>,
    /// Per reader with offsets, the id of the topic incarnation they are
    /// offsets in (version 4; `millpond_log::TopicId` as 32 hex digits). A
    /// topic deleted and created again has another id: the reader is
    /// refused rather than resumed at offsets of the old one.
    #[serde(default)]
    pub topic_ids: BTreeMap<String, String>,
    /// Per dead-letter topic, how far its letters are complete (version 5;
    /// before, none: a version 4 dead-letter topic is resumed as if empty of
    /// marks, see `docs/checkpoints.md`).
    #[serde(default)]
    pub dead_letters: BTreeMap<String, DeadLetterMarks>,
}

/// How far a dead-letter topic holds the letters of its source: every
/// record of `topic` (incarnation `topic_id`) below `next[partition]` that
/// the source (under `verdict`) rejects has its one letter in the topic.
/// A reader that rejects a record below the mark skips it: another reader
/// of the source wrote it already.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterMarks {
    pub topic: String,
    pub topic_id: String,
    /// What the source rejects (see `Job::declare_source`): marks of another
    /// verdict are started over.
    pub verdict: String,
    pub next: BTreeMap<u32, u64>,
}

/// What a view wants of its index ([`Checkpoints::register_view_index`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IndexWanted {
    /// The view reads its index, which must hold an entry per row (any
    /// multiplicity but [`crate::Multiplicity::Unique`], whose new index
    /// holds only its head).
    pub(crate) rows: bool,
    /// The view replaces its definition: its index must hold its rows.
    pub(crate) replaced: bool,
}

/// What a view's changelog holds (see "Replacing and dropping a view" in
/// `docs/checkpoints.md`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewChangelog {
    /// The definition's identity as the job declares it (SQL: the view's
    /// name and fingerprint; `Job::materialize`: empty).
    pub definition: String,
    /// The first epoch of the run that created the changelog: a reader
    /// resuming after an earlier epoch cannot be continued (what it holds
    /// came from a changelog that no longer exists).
    pub since: Epoch,
    /// The first epoch of the run that put this definition in place: the
    /// changelog retracts the previous definition's rows in that epoch.
    pub defined: Epoch,
    /// Distinct rows the view holds at the committed epoch (None: not
    /// counted yet, a view resumed from a version 3 checkpoint). A snapshot
    /// at the committed epoch that folds to another number of rows is
    /// refused: its changelog no longer covers that epoch.
    pub rows: Option<u64>,
}

/// Version 2 of the meta, as stored in the state store (postcard has no
/// optional fields): read and upgraded, never written. Postcard writes a
/// struct's fields one after the other with no framing, so each later
/// version is the one before it followed by its new fields.
#[derive(Deserialize)]
struct CheckpointMetaV2 {
    version: u32,
    epoch: Epoch,
    sources: BTreeMap<String, BTreeMap<u32, u64>>,
    sinks: BTreeMap<String, u64>,
    views: BTreeMap<String, String>,
    compactable: BTreeMap<String, (Epoch, u64)>,
    states: BTreeSet<String>,
}

/// Version 3: version 2 and `readers`.
#[derive(Deserialize)]
struct CheckpointMetaV3 {
    v2: CheckpointMetaV2,
    readers: BTreeMap<String, String>,
}

/// Version 4: version 3, `changelogs` and `topic_ids`.
#[derive(Deserialize)]
struct CheckpointMetaV4 {
    v3: CheckpointMetaV3,
    changelogs: BTreeMap<String, ViewChangelog>,
    topic_ids: BTreeMap<String, String>,
}

impl From<CheckpointMetaV2> for CheckpointMeta {
    /// Before `upgraded`: what later versions added is empty.
    fn from(v2: CheckpointMetaV2) -> CheckpointMeta {
        let CheckpointMetaV2 { version, epoch, sources, sinks, views, compactable, states } = v2;
        CheckpointMeta { version, epoch, sources, sinks, views, compactable, states, ..CheckpointMeta::default() }
    }
}

impl From<CheckpointMetaV3> for CheckpointMeta {
    fn from(v3: CheckpointMetaV3) -> CheckpointMeta {
        CheckpointMeta { readers: v3.readers, ..v3.v2.into() }
    }
}

impl From<CheckpointMetaV4> for CheckpointMeta {
    fn from(v4: CheckpointMetaV4) -> CheckpointMeta {
        CheckpointMeta { changelogs: v4.changelogs, topic_ids: v4.topic_ids, ..v4.v3.into() }
    }
}

fn check_version(version: u32, what: &str) -> Result<()> {
    if (META_VERSION_WITHOUT_READERS..=META_VERSION).contains(&version) {
        return Ok(());
    }
    Err(Error::CorruptState {
        what: what.to_owned(),
        reason: format!("version {version} (this build reads {META_VERSION_WITHOUT_READERS} to {META_VERSION})"),
    })
}

impl CheckpointMeta {
    /// Reads the readers' copy from `data_dir` (None if no checkpoint yet).
    pub fn read_published(data_dir: &Path) -> Result<Option<CheckpointMeta>> {
        let path = data_dir.join(CHECKPOINT_FILE);
        let text = match fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("reading", path)(e)),
        };
        let meta: CheckpointMeta = serde_json::from_slice(&text)
            .map_err(|e| Error::CorruptState { what: path.display().to_string(), reason: e.to_string() })?;
        let what = path.display().to_string();
        check_version(meta.version, &what)?;
        Ok(Some(meta.upgraded(&what)?))
    }

    /// Decodes the meta as stored in the state store (versions 2 to 6).
    fn decode(bytes: &[u8]) -> Result<CheckpointMeta> {
        const WHAT: &str = "checkpoint meta";
        // Every version starts with the version number.
        let (version, _) = postcard::take_from_bytes::<u32>(bytes)
            .map_err(|e| Error::CorruptState { what: WHAT.into(), reason: e.to_string() })?;
        check_version(version, WHAT)?;
        let meta: CheckpointMeta = match version {
            META_VERSION_WITHOUT_READERS => crate::codec::decode::<CheckpointMetaV2>(bytes, WHAT)?.into(),
            META_VERSION_WITHOUT_CHANGELOGS => crate::codec::decode::<CheckpointMetaV3>(bytes, WHAT)?.into(),
            META_VERSION_WITHOUT_DEAD_LETTERS => crate::codec::decode::<CheckpointMetaV4>(bytes, WHAT)?.into(),
            _ => crate::codec::decode(bytes, WHAT)?,
        };
        meta.upgraded(WHAT)
    }

    /// Brings a meta of an older readable version to this build's, and
    /// checks what it says about readers.
    fn upgraded(mut self, what: &str) -> Result<CheckpointMeta> {
        if self.version == META_VERSION_WITHOUT_READERS {
            // Version 2 had one reader per topic, named after it.
            self.readers = self.sources.keys().map(|topic| (topic.clone(), topic.clone())).collect();
            self.version = META_VERSION_WITHOUT_CHANGELOGS;
        }
        if self.version == META_VERSION_WITHOUT_CHANGELOGS {
            // Before version 4 a view had one definition since epoch 0.
            self.changelogs = self.views.keys().map(|view| (view.clone(), ViewChangelog::default())).collect();
            self.version = META_VERSION_WITHOUT_DEAD_LETTERS;
        }
        if self.version == META_VERSION_WITHOUT_DEAD_LETTERS {
            // Before version 5 each reader had a dead-letter topic of its own, without marks.
            self.version = META_VERSION_WITHOUT_APPLIED;
        }
        if self.version == META_VERSION_WITHOUT_APPLIED {
            // Views' state was complete at each commit; without markers it
            // is replayed once from the changelogs' start, which gives the same.
            self.version = META_VERSION;
        }
        if !self.views.keys().eq(self.changelogs.keys()) {
            return Err(Error::CorruptState {
                what: what.to_owned(),
                reason: "the views and the views with a definition differ".into(),
            });
        }
        if !self.readers_match_offsets() {
            return Err(Error::CorruptState {
                what: what.to_owned(),
                reason: "the readers with offsets and the readers with a topic differ".into(),
            });
        }
        Ok(self)
    }

    /// Invariant: exactly the readers with offsets have a topic.
    fn readers_match_offsets(&self) -> bool {
        self.sources.keys().eq(self.readers.keys())
    }

    /// Whether `reader` has no committed offsets (it reads from the start).
    pub(crate) fn is_fresh(&self, reader: &str) -> bool {
        self.sources.get(reader).is_none_or(BTreeMap::is_empty)
    }

    fn publish(&self, data_dir: &Path) -> Result<()> {
        let path = data_dir.join(CHECKPOINT_FILE);
        let tmp = data_dir.join(format!(".{CHECKPOINT_FILE}.tmp"));
        let text = serde_json::to_vec_pretty(self).expect("checkpoint meta serializes");
        fs::File::create(&tmp).and_then(|mut f| f.write_all(&text)).map_err(Error::io("writing", &tmp))?;
        fs::rename(&tmp, &path).map_err(Error::io("renaming", &tmp))
    }
}

/// What one epoch contributes to its checkpoint.
#[derive(Debug, Default)]
struct EpochWrites {
    batch: WriteBatch,
    /// (reader, topic, partition, next offset)
    sources: Vec<(String, String, u32, u64)>,
    sinks: Vec<(String, u64)>,
    /// (view, distinct rows after the epoch)
    views: Vec<(String, u64)>,
    /// (dead-letter topic, its marks after the epoch)
    dead_letters: Vec<(String, DeadLetterMarks)>,
}

/// One past commit: when, which epoch, and the sink ends it recorded.
type Commit = (std::time::Instant, Epoch, BTreeMap<String, u64>);

/// What a job declares while it is built (on worker 0, which builds every
/// part of it): everything else in the meta is undeclared.
#[derive(Debug, Default)]
pub(crate) struct Declarations {
    /// Reader name to topic.
    pub(crate) readers: BTreeMap<String, String>,
    /// Keyspaces of stateful operators and views.
    pub(crate) states: BTreeSet<String>,
    pub(crate) views: BTreeSet<String>,
    /// Changelog and dead-letter topics.
    pub(crate) sinks: BTreeSet<String>,
}

/// What the first commit of a run drops: keyspace deletions (committed with
/// it) and sink topics (deleted from the log once it is durable).
#[derive(Debug, Default)]
struct Drops {
    keyspaces: WriteBatch,
    topics: Vec<String>,
}

/// The checkpoint coordinator shared by all workers of a runtime.
#[derive(Debug)]
pub(crate) struct Checkpoints {
    store: Arc<dyn StateStore>,
    log: Arc<Log>,
    data_dir: PathBuf,
    meta_keyspace: Keyspace,
    /// Where each view's state is applied through ([`crate::view_state`]).
    applied_keyspace: Keyspace,
    /// Sync commits (checkpoints on); off only for the benchmark baseline.
    durable: bool,
    pending: Mutex<BTreeMap<Epoch, EpochWrites>>,
    meta: Mutex<CheckpointMeta>,
    /// The committed meta this run started from (never changes).
    resumed: CheckpointMeta,
    /// Applies each commit's view rows to the views' state, then raises
    /// the committed epoch.
    applier: Applier,
    /// The last epoch whose synced batch is stored (ahead of the committed
    /// epoch while its views' state is applied): nothing may be handed
    /// over for it any more.
    stored_epoch: AtomicU64,
    /// An operator handed over an epoch's writes, or a sink its position,
    /// since worker 0 last looked at the probe: see [`Checkpoints::progress_due`].
    finished: AtomicBool,
    /// Views whose state could not be caught up at open: their compaction
    /// bounds stay put, and a job that declares one is refused.
    behind_views: BTreeSet<String>,
    catch_up_failures: Mutex<BTreeMap<String, Error>>,
    /// Planned by `drop_undeclared`, taken by the first commit.
    drops: Mutex<Option<Drops>>,
    /// The hasher of each view index opened in this run (every worker's
    /// fold of a view gets the one the first drew or read).
    view_hashers: Mutex<BTreeMap<String, crate::view_index::Head>>,
    /// Crash tests only: a pause between syncing sinks and committing.
    pub(crate) commit_delay: std::time::Duration,
    /// How long a committed epoch stays safe from compaction.
    pub(crate) compaction_lag: std::time::Duration,
    /// Changelog positions compaction must not pass (durable subscriptions).
    pub(crate) holds: crate::config::ChangelogHolds,
    /// Rung after each publish.
    pub(crate) on_commit: Option<crate::config::CommitBell>,
    /// Where commits and sinks record their durations.
    pub(crate) timings: Arc<crate::timing::CommitTimings>,
    /// Recent commits (time, epoch, sink ends), oldest first, trimmed to the
    /// newest one older than the lag.
    history: Mutex<std::collections::VecDeque<Commit>>,
    /// Epochs must exceed every epoch readers may have seen, even if the
    /// store was lost (in-memory state): the published epoch.
    epoch_floor: Epoch,
    /// What operators and views read of their state in this run.
    state_reads: crate::opstate::StateReadCounters,
}

impl Checkpoints {
    /// Loads the last committed checkpoint and republishes it for readers.
    pub(crate) fn open(
        store: Arc<dyn StateStore>,
        log: Arc<Log>,
        data_dir: PathBuf,
        durable: bool,
        apply_nice: i32,
    ) -> Result<Checkpoints> {
        let meta_keyspace = store.keyspace(META_KEYSPACE)?;
        let meta = match store.get(meta_keyspace, META_KEY)? {
            None => CheckpointMeta { version: META_VERSION, ..CheckpointMeta::default() },
            Some(bytes) => CheckpointMeta::decode(&bytes)?,
        };
        // Nothing but a commit fills the meta, and a commit has an epoch: so
        // a never-committed directory has only fresh readers and new states.
        if meta.epoch == 0 && !(meta.sources.is_empty() && meta.sinks.is_empty() && meta.states.is_empty()) {
            return Err(Error::CorruptState {
                what: "checkpoint meta".into(),
                reason: "epoch 0 with offsets, sinks or states".into(),
            });
        }
        let published = CheckpointMeta::read_published(&data_dir).ok().flatten().map_or(0, |m| m.epoch);
        let epoch_floor = published.max(meta.epoch);
        if meta.epoch > 0 {
            meta.publish(&data_dir)?;
        } else if published > 0 {
            // The store starts empty (in-memory state, or a lost state
            // directory): what readers saw is gone and sinks restart from 0.
            let path = data_dir.join(CHECKPOINT_FILE);
            fs::remove_file(&path).map_err(Error::io("removing", &path))?;
        }
        // Views' state writes of the last commit may not be applied yet:
        // replayed from their changelogs (before compaction may resume).
        let catch_up_failures = crate::view_state::catch_up_all(store.as_ref(), &log, &meta)?;
        let applied_keyspace = store.keyspace(crate::view_state::APPLIED_KEYSPACE)?;
        // Keep compaction where the last checkpoint allowed it.
        for (topic, (_, offset)) in &meta.compactable {
            if log.topics().contains(topic) {
                log.set_cleanable_below(topic, 0, *offset)?;
            }
        }
        Ok(Checkpoints {
            compaction_lag: std::time::Duration::from_secs(600),
            holds: crate::config::ChangelogHolds::default(),
            on_commit: None,
            timings: Arc::default(),
            // The resumed commit is at least as old as now, and every view
            // is applied through it once the catch-up above is durable
            // (with this run's first commit): a bound for compaction.
            history: Mutex::new(
                (meta.epoch > 0)
                    .then(|| (std::time::Instant::now(), meta.epoch, meta.sinks.clone()))
                    .into_iter()
                    .collect(),
            ),
            epoch_floor,
            state_reads: Default::default(),
            applier: Applier::start(store.clone(), log.clone(), meta.epoch, apply_nice)?,
            stored_epoch: AtomicU64::new(meta.epoch),
            finished: AtomicBool::new(false),
            behind_views: catch_up_failures.keys().cloned().collect(),
            catch_up_failures: Mutex::new(catch_up_failures),
            store,
            log,
            data_dir,
            meta_keyspace,
            applied_keyspace,
            durable,
            pending: Mutex::new(BTreeMap::new()),
            resumed: meta.clone(),
            meta: Mutex::new(meta),
            drops: Mutex::new(None),
            view_hashers: Mutex::new(BTreeMap::new()),
            commit_delay: std::time::Duration::ZERO,
        })
    }

    pub(crate) fn store(&self) -> &Arc<dyn StateStore> {
        &self.store
    }

    pub(crate) fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// The committed checkpoint this run resumed from.
    pub(crate) fn resumed(&self) -> &CheckpointMeta {
        &self.resumed
    }

    /// Adds an operator's reads of its state.
    pub(crate) fn count_reads(&self, reads: crate::opstate::StateReads) {
        self.state_reads.add(reads);
    }

    /// What operators and views have read of their state in this run.
    pub(crate) fn state_reads(&self) -> crate::opstate::StateReads {
        self.state_reads.total()
    }

    /// The first epoch of a run must exceed this.
    pub(crate) fn epoch_floor(&self) -> Epoch {
        self.epoch_floor
    }

    /// The offset below which a sink topic may be compacted (the committed
    /// meta's, 0 if none).
    pub(crate) fn cleanable_below(&self, topic: &str) -> u64 {
        self.meta.lock().expect("meta lock").compactable.get(topic).map_or(0, |(_, offset)| *offset)
    }

    /// The last epoch committed and applied to the views' state (what
    /// operators' overlays may forget).
    pub(crate) fn committed_epoch(&self) -> Epoch {
        self.applier.committed_epoch()
    }

    /// Waits for the last commit's state apply; fails if an apply failed.
    pub(crate) fn finish_applying(&self) -> Result<()> {
        self.applier.wait()
    }

    /// Adds state changes made while processing `epoch`.
    pub(crate) fn add_writes(&self, epoch: Epoch, batch: &mut WriteBatch) {
        assert!(
            epoch > self.stored_epoch.load(Ordering::Acquire),
            "writes for epoch {epoch}, which is already committed"
        );
        self.pending.lock().expect("pending lock").entry(epoch).or_default().batch.append(batch);
        self.finished.store(true, Ordering::Release);
    }

    /// Why view `view`'s state could not be caught up with its changelog at
    /// open, if it could not (taken by the view's sink when it is built).
    pub(crate) fn take_catch_up_failure(&self, view: &str) -> Option<Error> {
        self.catch_up_failures.lock().expect("catch-up failures lock").remove(view)
    }

    /// Whether an operator finished an epoch since worker 0 last read the
    /// probe: the next step of the workers then carries that progress
    /// before sources read more, so the probe passes the epoch (and the
    /// commit can start) without first processing what arrived meanwhile.
    /// Only a hint: a step it makes sources skip is not lost, just later.
    pub(crate) fn progress_due(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Worker 0 read the probe after a step that carried the progress due.
    pub(crate) fn progress_carried(&self) {
        self.finished.store(false, Ordering::Release);
    }

    /// Records that `reader`'s partition of `topic` reached `next_offset` at
    /// the end of `epoch`.
    pub(crate) fn source_position(&self, epoch: Epoch, reader: &str, topic: &str, partition: u32, next_offset: u64) {
        assert!(epoch > self.stored_epoch.load(Ordering::Acquire), "source position for committed epoch {epoch}");
        self.pending.lock().expect("pending lock").entry(epoch).or_default().sources.push((
            reader.to_owned(),
            topic.to_owned(),
            partition,
            next_offset,
        ));
    }

    /// Records that a sink topic ends at `end_offset` after `epoch`'s output.
    pub(crate) fn sink_position(&self, epoch: Epoch, topic: &str, end_offset: u64) {
        assert!(epoch > self.stored_epoch.load(Ordering::Acquire), "sink position for committed epoch {epoch}");
        self.pending.lock().expect("pending lock").entry(epoch).or_default().sinks.push((topic.to_owned(), end_offset));
        self.finished.store(true, Ordering::Release);
    }

    /// Registers an operator's or view's state, fed by the readers in
    /// `lineage`. A state that the last checkpoint does not list is new: it
    /// starts empty, so it is accepted only if every reader it derives from
    /// is fresh (reads all the retained input). A data directory that has
    /// never committed has only fresh readers.
    pub(crate) fn register_state(&self, keyspace: &str, lineage: &BTreeSet<String>) -> Result<()> {
        let mut meta = self.meta.lock().expect("meta lock");
        if !self.resumed.states.contains(keyspace) {
            let resuming = self.resuming_readers(lineage);
            if !resuming.is_empty() {
                return Err(Error::InvalidJob(format!(
                    "'{keyspace}' is new, but this data directory's job has committed epoch {} and it reads from \
                     reader(s) {} that resume from committed offsets: its state would miss their input before \
                     those offsets. Feed it from new readers (Job::source_named), which read from the start of the \
                     log, or run the changed job in a new data directory",
                    self.resumed.epoch,
                    resuming.join(", ")
                )));
            }
        }
        meta.states.insert(keyspace.to_owned());
        Ok(())
    }

    /// Registers the index `keyspace` of a view whose state had the layout
    /// before view indexes in keyspace `before` (named as its changelog).
    /// A view the resumed checkpoint has in that layout is not new: its
    /// index was replayed from its changelog when the checkpoints opened
    /// ([`crate::view_state::catch_up_all`]), and the old keyspace and its
    /// marker are deleted by the run's first commit (at `first_epoch`).
    /// Otherwise as [`Checkpoints::register_state`]. Returns the index's
    /// hasher ([`Checkpoints::view_hasher`]).
    pub(crate) fn register_view_index(
        &self,
        (keyspace, before): (&str, &str),
        lineage: &BTreeSet<String>,
        (first_epoch, index): (Epoch, IndexWanted),
        what: &str,
    ) -> Result<crate::view_index::Head> {
        if self.resumed.states.contains(keyspace) || !self.resumed.states.contains(before) {
            self.register_state(keyspace, lineage)?;
            let new = !self.resumed.states.contains(keyspace);
            return self.view_hasher((keyspace, before), new, index, what);
        }
        self.migrate_view_state(keyspace, before, first_epoch)?;
        self.view_hasher((keyspace, before), false, index, what)
    }

    /// [`Checkpoints::register_view_index`] of a view resumed in the layout
    /// before view indexes.
    fn migrate_view_state(&self, keyspace: &str, before: &str, first_epoch: Epoch) -> Result<()> {
        let mut meta = self.meta.lock().expect("meta lock");
        meta.states.insert(keyspace.to_owned());
        if meta.states.remove(before) {
            assert!(first_epoch > meta.epoch, "the first epoch {first_epoch} follows the committed {}", meta.epoch);
            let mut drops = Drops::default();
            drops.keyspaces.delete_keyspace(self.store.keyspace(before)?);
            let markers = self.store.keyspace(crate::view_state::APPLIED_KEYSPACE_BEFORE_INDEX)?;
            drops.keyspaces.delete(markers, before.as_bytes());
            self.plan_drops(drops, first_epoch);
        }
        Ok(())
    }

    /// Runs `f` under the lock of the views' index heads: worker 0 cuts a
    /// view's changelog back to its committed end under it, so that no
    /// replay of that changelog into its index ([`Checkpoints::view_hasher`],
    /// on whichever worker asks first) reads a segment being cut.
    pub(crate) fn under_view_index_lock<T>(&self, f: impl FnOnce() -> T) -> T {
        let _heads = self.view_hashers.lock().expect("view hashers lock");
        f()
    }

    /// The head of the view index in `keyspace` (its changelog `topic`),
    /// read or drawn (and committed) by the first worker that asks, so
    /// that every worker gets the same one. The index of a `new` view
    /// starts empty: whatever an earlier incarnation left in it (and its
    /// marker) is deleted first; it holds rows unless `index` says it need
    /// not. An index without rows whose view is `replaced` (the replacement
    /// retracts them) or now reads them (a view no longer `Unique` under the
    /// same definition) is made to hold them first, by the worker that asks
    /// first while the others wait.
    fn view_hasher(
        &self,
        (keyspace, topic): (&str, &str),
        new: bool,
        index: IndexWanted,
        what: &str,
    ) -> Result<crate::view_index::Head> {
        let mut hashers = self.view_hashers.lock().expect("view hashers lock");
        if let Some(&head) = hashers.get(keyspace) {
            return Ok(head);
        }
        let space = self.store.keyspace(keyspace)?;
        if new {
            let mut batch = WriteBatch::new();
            batch.delete_keyspace(space);
            batch.delete(self.applied_keyspace, topic.as_bytes());
            self.store.commit(batch, true)?;
        }
        let mut head = crate::view_index::head_or_create(self.store.as_ref(), space, what, index.rows)?;
        if (index.rows || index.replaced) && !head.holds_rows {
            let end = self.resumed.sinks.get(topic).copied().unwrap_or(0);
            crate::view_state::index_rows(self.store.as_ref(), &self.log, (space, topic), end, what)?;
            head.holds_rows = true;
        }
        hashers.insert(keyspace.to_owned(), head);
        Ok(head)
    }

    /// The readers of `lineage` that resume from committed offsets (not
    /// fresh: they will not read the input before those offsets again).
    pub(crate) fn resuming_readers<'a>(&self, lineage: &'a BTreeSet<String>) -> Vec<&'a str> {
        lineage.iter().filter(|reader| !self.resumed.is_fresh(reader)).map(String::as_str).collect()
    }

    /// Registers `keyspace` as the new layout of state `from`: when the
    /// resumed checkpoint lists `from` but not `keyspace`, `keyspace` is
    /// accepted as resumed (not new), and the caller must move `from`'s
    /// entries into it before the first epoch (returns true). Otherwise as
    /// [`Checkpoints::register_state`] (returns false).
    pub(crate) fn register_state_moved_from(
        &self,
        keyspace: &str,
        from: &str,
        lineage: &BTreeSet<String>,
    ) -> Result<bool> {
        if self.resumed.states.contains(keyspace) || !self.resumed.states.contains(from) {
            return self.register_state(keyspace, lineage).map(|()| false);
        }
        self.meta.lock().expect("meta lock").states.insert(keyspace.to_owned());
        Ok(true)
    }

    /// Registers a view's changelog topic and definition (committed with
    /// the next checkpoint) for a run whose first epoch is `first_epoch`.
    /// Returns whether the resumed checkpoint has the view under another
    /// definition (its changelog must then retract the old rows at
    /// `first_epoch`), and the rows it holds if counted.
    pub(crate) fn register_view(
        &self,
        name: &str,
        topic: &str,
        definition: &str,
        first_epoch: Epoch,
    ) -> (bool, Option<u64>) {
        let mut meta = self.meta.lock().expect("meta lock");
        let resumed = self.resumed_changelog(name, topic);
        let definition = definition.to_owned();
        let (entry, replaced) = match resumed {
            Some(old) if old.definition == definition => (old.clone(), false),
            Some(old) => (ViewChangelog { definition, defined: first_epoch, ..old.clone() }, true),
            None => (ViewChangelog { definition, since: first_epoch, defined: first_epoch, rows: Some(0) }, false),
        };
        assert!(entry.since <= entry.defined && entry.defined <= first_epoch, "a definition starts before this run");
        let rows = entry.rows;
        meta.views.insert(name.to_owned(), topic.to_owned());
        meta.changelogs.insert(name.to_owned(), entry);
        (replaced, rows)
    }

    /// Whether the resumed checkpoint has view `name` (changelog `topic`)
    /// under a definition other than `definition`: what
    /// [`Checkpoints::register_view`] will answer, for any worker to ask.
    pub(crate) fn view_replaced(&self, name: &str, topic: &str, definition: &str) -> bool {
        self.resumed_changelog(name, topic).is_some_and(|old| old.definition != definition)
    }

    /// The resumed changelog of view `name`, if it resumes with `topic`.
    fn resumed_changelog(&self, name: &str, topic: &str) -> Option<&ViewChangelog> {
        self.resumed.changelogs.get(name).filter(|_| self.resumed.views.get(name).is_some_and(|t| t == topic))
    }

    /// The reader `reader` reads the topic incarnation `topic_id` (recorded
    /// by the next commit; the source checked it against the resumed one).
    pub(crate) fn register_topic_id(&self, reader: &str, topic_id: &str) {
        let resumed = self.resumed.topic_ids.get(reader).filter(|_| !self.resumed.is_fresh(reader));
        assert!(resumed.is_none_or(|id| id == topic_id), "a reader resumes only in the incarnation it read");
        self.meta.lock().expect("meta lock").topic_ids.insert(reader.to_owned(), topic_id.to_owned());
    }

    /// The view `name` holds `rows` distinct rows after `epoch` (its sink
    /// wrote the epoch).
    pub(crate) fn view_rows(&self, epoch: Epoch, name: &str, rows: u64) {
        assert!(epoch > self.stored_epoch.load(Ordering::Acquire), "view rows for committed epoch {epoch}");
        self.pending.lock().expect("pending lock").entry(epoch).or_default().views.push((name.to_owned(), rows));
    }

    /// The dead-letter topic `topic` is complete up to `marks` after `epoch`
    /// (its sink wrote the epoch).
    pub(crate) fn dead_letter_marks(&self, epoch: Epoch, topic: &str, marks: DeadLetterMarks) {
        assert!(epoch > self.stored_epoch.load(Ordering::Acquire), "dead-letter marks for committed epoch {epoch}");
        self.pending
            .lock()
            .expect("pending lock")
            .entry(epoch)
            .or_default()
            .dead_letters
            .push((topic.to_owned(), marks));
    }

    /// A run resumes the marks of `topic` other than committed (started
    /// over, or cut back to the end of a log that lost records): the next
    /// commit records them, and marks move forward from them.
    pub(crate) fn reset_dead_letter_marks(&self, topic: &str, marks: DeadLetterMarks) {
        self.meta.lock().expect("meta lock").dead_letters.insert(topic.to_owned(), marks);
    }

    /// Drops everything the last checkpoint lists and `declared` does not:
    /// readers' offsets, states, views and sink topics leave the meta now
    /// (it is persisted only by a commit); keyspace deletions and topic
    /// deletions wait for the first commit of the run, which this forces
    /// at `first_epoch` even if nothing else changes. Returns what it drops,
    /// as `kind name` strings.
    pub(crate) fn drop_undeclared(&self, declared: &Declarations, first_epoch: Epoch) -> Result<Vec<String>> {
        let mut meta = self.meta.lock().expect("meta lock");
        assert_eq!(meta.epoch, self.resumed.epoch, "drops are planned before the run's first commit");
        let mut dropped = Vec::new();
        let mut drops = Drops::default();
        // A topic this job reads (a changelog used as input) stays in the
        // log even if the view that wrote it is dropped.
        let mut delete_later = |topic: String| {
            if !declared.readers.values().any(|read| *read == topic) {
                drops.topics.push(topic);
            }
        };
        let undeclared_readers: Vec<String> =
            meta.sources.keys().filter(|reader| !declared.readers.contains_key(*reader)).cloned().collect();
        for reader in undeclared_readers {
            meta.sources.remove(&reader);
            meta.readers.remove(&reader);
            meta.topic_ids.remove(&reader);
            dropped.push(format!("reader {reader}"));
        }
        let undeclared_views: Vec<String> =
            meta.views.keys().filter(|view| !declared.views.contains(*view)).cloned().collect();
        for view in undeclared_views {
            let topic = meta.views.remove(&view).expect("listed above");
            meta.changelogs.remove(&view);
            drops.keyspaces.delete(self.applied_keyspace, topic.as_bytes());
            // Its index, also when the startup replay built it for a view
            // whose state was of the layout before (listed as that).
            drops.keyspaces.delete_keyspace(self.store.keyspace(&crate::view_index::index_keyspace(&view))?);
            // A topic with an end offset goes with the sinks below; this one
            // never had a row committed.
            if !meta.sinks.contains_key(&topic) {
                delete_later(topic);
            }
            dropped.push(format!("view {view}"));
        }
        let undeclared_sinks: Vec<String> =
            meta.sinks.keys().filter(|topic| !declared.sinks.contains(*topic)).cloned().collect();
        for topic in undeclared_sinks {
            meta.sinks.remove(&topic);
            dropped.push(format!("topic {topic}"));
            delete_later(topic);
        }
        // A dropped changelog's compaction bound, and a dropped dead-letter
        // topic's marks, go with it.
        meta.compactable.retain(|topic, _| declared.sinks.contains(topic));
        meta.dead_letters.retain(|topic, _| declared.sinks.contains(topic));
        let undeclared_states: Vec<String> =
            meta.states.iter().filter(|keyspace| !declared.states.contains(*keyspace)).cloned().collect();
        for keyspace in undeclared_states {
            meta.states.remove(&keyspace);
            drops.keyspaces.delete_keyspace(self.store.keyspace(&keyspace)?);
            if keyspace.starts_with(crate::naming::CHANGELOG_TOPIC_PREFIX) {
                // A view's state of the layout before its index (docs/state.md):
                // its marker, keyed by the changelog topic (the keyspace's name), goes with it.
                let markers = self.store.keyspace(crate::view_state::APPLIED_KEYSPACE_BEFORE_INDEX)?;
                drops.keyspaces.delete(markers, keyspace.as_bytes());
            }
            dropped.push(format!("state {keyspace}"));
        }
        assert!(meta.readers_match_offsets(), "dropping keeps a topic for every reader with offsets");
        if !dropped.is_empty() {
            assert!(first_epoch > meta.epoch, "the first epoch {first_epoch} follows the committed {}", meta.epoch);
            self.plan_drops(drops, first_epoch);
        }
        Ok(dropped)
    }

    /// Adds `drops` to what the run's first commit (at `first_epoch`, forced
    /// even if nothing else changes) deletes.
    fn plan_drops(&self, mut drops: Drops, first_epoch: Epoch) {
        self.pending.lock().expect("pending lock").entry(first_epoch).or_default();
        let mut planned = self.drops.lock().expect("drops lock");
        let planned = planned.get_or_insert_with(Drops::default);
        planned.keyspaces.append(&mut drops.keyspaces);
        planned.topics.append(&mut drops.topics);
    }

    /// Deletes sink topics (changelogs, dead letters) that the last
    /// checkpoint does not list and `declared` does not use: left behind by
    /// a crash between a commit that dropped them and their deletion, or
    /// created by a run that never committed them. Nothing in them is
    /// committed (a sink's committed end is 0 unless the meta says more).
    /// Returns the deleted topics.
    pub(crate) fn delete_orphan_sink_topics(&self, declared: &Declarations) -> Result<Vec<String>> {
        let listed = |topic: &String| {
            self.resumed.sinks.contains_key(topic)
                || self.resumed.views.values().any(|t| t == topic)
                || declared.sinks.contains(topic)
                || declared.readers.values().any(|t| t == topic)
        };
        let mut deleted = Vec::new();
        for topic in self.log.topics().into_iter().filter(|t| crate::naming::is_sink_topic_name(t) && !listed(t)) {
            // Sink topics have one partition; anything else is not ours.
            if self.log.topic_config(&topic).is_ok_and(|config| config.partitions == 1) {
                delete_topic(&self.log, &topic)?;
                deleted.push(topic);
            }
        }
        Ok(deleted)
    }

    /// Commits every pending epoch below `frontier` (the least epoch that
    /// may still change). Returns the newly committed epoch, if any.
    pub(crate) fn commit_below(&self, frontier: Epoch) -> Result<Option<Epoch>> {
        let ready = {
            let mut pending = self.pending.lock().expect("pending lock");
            let rest = pending.split_off(&frontier);
            std::mem::replace(&mut *pending, rest)
        };
        let Some(&epoch) = ready.keys().next_back() else { return Ok(None) };
        let started = std::time::Instant::now();
        // A failed flush, retention or compaction in the log's background:
        // stop rather than commit (and serve) on top of it.
        if let Some(error) = self.log.background_error() {
            return Err(Error::Background(error));
        }
        let mut meta = self.meta.lock().expect("meta lock");
        assert!(epoch > meta.epoch, "committed epochs increase: {epoch} after {}", meta.epoch);
        // Keyspace deletions go first: a batch applies in order (though
        // nothing of this run writes to a dropped keyspace: it is undeclared).
        let (mut batch, dropped_topics) = match self.drops.lock().expect("drops lock").take() {
            Some(drops) => {
                assert_eq!(meta.epoch, self.resumed.epoch, "drops are committed by the first commit of a run");
                (drops.keyspaces, drops.topics)
            }
            None => (WriteBatch::new(), Vec::new()),
        };
        let mut synced = std::collections::BTreeSet::new();
        for (_, mut writes) in ready {
            batch.append(&mut writes.batch);
            for (reader, topic, partition, offset) in writes.sources {
                let previous = meta.readers.insert(reader.clone(), topic.clone());
                assert!(
                    previous.as_ref().is_none_or(|p| *p == topic),
                    "reader {reader} reads {topic}, but its offsets are in {previous:?}"
                );
                meta.sources.entry(reader).or_default().insert(partition, offset);
            }
            for (view, rows) in writes.views {
                meta.changelogs.get_mut(&view).expect("a view's sink writes after it registered").rows = Some(rows);
            }
            for (topic, marks) in writes.dead_letters {
                let previous = meta.dead_letters.insert(topic.clone(), marks.clone());
                assert!(
                    previous.is_none_or(|p| (p.topic_id, &p.verdict) == (marks.topic_id.clone(), &marks.verdict)
                        && p.next.iter().all(|(partition, next)| marks.next.get(partition) >= Some(next))),
                    "dead-letter marks of {topic} only move forward from what the run resumed"
                );
            }
            for (topic, end) in writes.sinks {
                let previous = meta.sinks.insert(topic.clone(), end);
                assert!(previous.is_none_or(|p| p <= end), "sink {topic} moved back from {previous:?} to {end}");
                synced.insert(topic);
            }
        }
        assert!(meta.readers_match_offsets(), "every reader with offsets has a topic");
        assert!(meta.views.keys().eq(meta.changelogs.keys()), "every view has a definition");
        if self.durable {
            let syncing = std::time::Instant::now();
            for topic in &synced {
                self.log.sync(topic, 0)?;
            }
            self.timings.changelog_sync.record(syncing.elapsed());
        }
        if !self.commit_delay.is_zero() {
            std::thread::sleep(self.commit_delay);
        }
        meta.epoch = epoch;
        // Compaction may take the changelogs up to the newest commit that is
        // older than the lag (recorded before the log is told, so readers
        // learn the bound first).
        // Only an earlier commit bounds it, never this one: a view's state
        // is applied through at least the previous commit's end once this
        // commit is durable, and replay needs every record above that.
        let compactable = {
            let mut history = self.history.lock().expect("history lock");
            while history.len() >= 2 && history[1].0.elapsed() >= self.compaction_lag {
                history.pop_front();
            }
            let bound = history.front().filter(|(at, ..)| at.elapsed() >= self.compaction_lag).cloned();
            history.push_back((std::time::Instant::now(), epoch, meta.sinks.clone()));
            bound
        };
        if let Some((_, compact_epoch, ends)) = &compactable {
            let views: Vec<(String, String)> = meta.views.iter().map(|(v, t)| (v.clone(), t.clone())).collect();
            for (view, topic) in views {
                if self.behind_views.contains(&view) {
                    continue; // its state is behind: replay needs every record
                }
                // A hold older than the bound keeps the bound where it was.
                if crate::config::held_epoch(&self.holds, &view, epoch).is_some_and(|held| held < *compact_epoch) {
                    continue;
                }
                if let Some(end) = ends.get(&topic) {
                    meta.compactable.insert(topic, (*compact_epoch, *end));
                }
            }
        }
        batch.put_owned(self.meta_keyspace, META_KEY.to_vec(), crate::codec::encode(&*meta));
        // The previous commit's state apply is written before this synced
        // batch, which makes it durable (its markers are then at most one
        // commit behind: the compaction bound above relies on it).
        self.applier.wait()?;
        let storing = std::time::Instant::now();
        self.store.commit(batch, self.durable)?;
        self.stored_epoch.store(epoch, Ordering::Release);
        let publishing = std::time::Instant::now();
        self.timings.state_commit.record(publishing - storing);
        meta.publish(&self.data_dir)?;
        self.timings.publish.record(publishing.elapsed());
        self.timings.commit.record(started.elapsed());
        if let Some(bell) = &self.on_commit {
            (bell.0)(epoch);
        }
        // The views' state, from the changelog records just committed, each
        // view's marker with it, on the applier's thread; durable with the
        // next commit's sync (a crash before it replays them). It raises the
        // committed epoch, which operators' overlays forget epochs by.
        let views = meta.views.iter().filter(|(_, topic)| synced.contains(*topic));
        let views = views.map(|(view, topic)| {
            (view.clone(), topic.clone(), *meta.sinks.get(topic).expect("a synced sink has an end"))
        });
        let submitted = std::time::Instant::now();
        self.applier.submit(Apply { epoch, views: views.collect(), timings: self.timings.clone(), submitted })?;
        // The dropped topics go only now: a crash before this point leaves
        // them listed by the old checkpoint (and whole) or orphaned by the
        // new one (deleted at the next startup that drops undeclared parts).
        for topic in &dropped_topics {
            delete_topic(&self.log, topic)?;
        }
        if compactable.is_some() {
            for (topic, (_, offset)) in &meta.compactable {
                self.log.set_cleanable_below(topic, 0, *offset)?;
            }
        }
        Ok(Some(epoch))
    }
}

/// Deletes `topic` if it exists.
fn delete_topic(log: &Log, topic: &str) -> Result<()> {
    match log.delete_topic(topic) {
        Ok(()) | Err(millpond_log::Error::UnknownTopic(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(version: u32) -> CheckpointMeta {
        CheckpointMeta {
            version,
            epoch: 7,
            sources: BTreeMap::from([("r".into(), BTreeMap::from([(0, 5)]))]),
            sinks: BTreeMap::from([("view.v".into(), 3)]),
            readers: BTreeMap::from([("r".into(), "t".into())]),
            ..CheckpointMeta::default()
        }
    }

    /// Each version's layout is the one before it plus trailing fields: the
    /// bytes of a version 6 meta whose newer fields are empty, cut before
    /// them, are that meta in the older version (5 has 6's layout).
    #[test]
    fn older_versions_decode_and_upgrade() {
        let trailing_empty_fields = [
            (META_VERSION_WITHOUT_APPLIED, 0),
            (META_VERSION_WITHOUT_DEAD_LETTERS, 1),
            (META_VERSION_WITHOUT_CHANGELOGS, 3),
        ];
        for (version, cut) in trailing_empty_fields {
            let bytes = crate::codec::encode(&meta(version));
            let decoded = CheckpointMeta::decode(&bytes[..bytes.len() - cut]).unwrap();
            assert_eq!(decoded, meta(META_VERSION), "version {version}");
        }
        let mut with_marks = meta(META_VERSION);
        with_marks.dead_letters.insert(
            "t.dead-letter".into(),
            DeadLetterMarks {
                topic: "t".into(),
                topic_id: "id".into(),
                verdict: "v".into(),
                next: BTreeMap::from([(0, 4)]),
            },
        );
        assert_eq!(CheckpointMeta::decode(&crate::codec::encode(&with_marks)).unwrap(), with_marks);
    }
}
