//! Catalog persistence: loading the catalog topic (objects, DML markers
//! and the tables' committed ends), taking back table rows a crash left
//! uncommitted, and applying a batch's effects: topics and table rows
//! first, then the catalog records in one append, the batch's commit point.
//!
//! Invariant: a table topic's records below its committed end are exactly
//! the committed batches' rows; records past it belong to no committed
//! batch, and before anything reads the table again (the next batch, or the
//! next session to open the directory) they are taken back by appending,
//! for each key they touched, its committed value (or a tombstone). Offsets
//! are never reused, so a reader that saw them (a view of a running server)
//! sees them retracted. Compaction of a table topic never decides among
//! records past the committed end (the topic's persisted bound).
use super::*;

/// The layout of every table topic: compacted, below the committed end only.
pub(super) const TABLE_TOPIC_SPEC: TopicSpec = TopicSpec { partitions: 1, compacted: true, compaction_bounded: true };

/// Catalog keys of the tables' committed ends start so; then `v1/TOPIC`.
pub(super) const TABLE_END_PREFIX: &str = "table-end/";

/// The committed-end record format written.
pub(super) const TABLE_END_VERSION: u32 = 1;

/// A table topic's committed end, the value of catalog key
/// `table-end/v1/TOPIC`: the topic's records below `end` are the committed
/// batches' rows (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TableEnd {
    pub(super) version: u32,
    pub(super) topic: String,
    pub(super) end: u64,
}

impl TableEnd {
    fn key(topic: &str) -> String {
        format!("{TABLE_END_PREFIX}v1/{topic}")
    }

    fn record(topic: &str, end: u64) -> TopicRecord {
        let value = TableEnd { version: TABLE_END_VERSION, topic: topic.to_owned(), end };
        TopicRecord {
            key: Some(TableEnd::key(topic).into_bytes()),
            value: Some(serde_json::to_vec(&value).expect("a table end serializes")),
            headers: vec![],
        }
    }

    /// Reads one back: malformed, of another version or under another key
    /// is an error that names it.
    fn read(key: &str, offset: u64, value: &[u8]) -> Result<TableEnd> {
        let refuse = |message: String| Error::Catalog { offset, message: format!("table end \"{key}\": {message}") };
        let end: TableEnd = read_versioned(value, TABLE_END_VERSION, refuse)?;
        if TableEnd::key(&end.topic) != key {
            return Err(refuse(format!("it names topic \"{}\"", end.topic)));
        }
        Ok(end)
    }
}

/// Catalog keys of DML markers start so; then `v1/FILE/STATEMENT/N`.
pub(super) const MARKER_PREFIX: &str = "applied/";

/// The marker format written (docs/sql.md, "DML of a file runs once").
pub(super) const MARKER_VERSION: u32 = 1;

/// A file statement's DML marker, the value of catalog key
/// `applied/v1/FILE/STATEMENT/N` (FNV-1a of the file's canonical path and
/// of the statement's canonical text, in hex; N its occurrence in the file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Marker {
    pub(super) version: u32,
    /// The file, as the key's hash was taken of it.
    pub(super) file: String,
    /// The table written: its markers go when it is dropped.
    pub(super) table: String,
    /// Where the statement's rows go: `records` records from `offset` of `topic`.
    pub(super) topic: String,
    pub(super) offset: u64,
    pub(super) records: u64,
}

/// The marker a file statement gets: its key, and its file.
#[derive(Clone, Debug)]
pub(super) struct MarkerKey {
    pub(super) key: String,
    pub(super) file: String,
}

impl Marker {
    /// Reads a marker back: a malformed one, or one of another version, is an
    /// error that names it (and its offset).
    pub(super) fn read(key: &str, offset: u64, value: &[u8]) -> Result<Marker> {
        let refuse = |message: String| Error::Catalog { offset, message: format!("DML marker \"{key}\": {message}") };
        let Some(rest) = key.strip_prefix(MARKER_PREFIX).and_then(|k| k.strip_prefix("v1/")) else {
            return Err(refuse(
                "not a version 1 key (markers before version 1, `applied/HASH/N`, were never released; delete the \
                 data directory's catalog to start over)"
                    .into(),
            ));
        };
        if rest.split('/').count() != 3 {
            return Err(refuse("a version 1 key is applied/v1/FILE/STATEMENT/N".into()));
        }
        read_versioned(value, MARKER_VERSION, refuse)
    }
}

/// A catalog value in JSON with a `version` field that must be `version`;
/// `refuse` words the error.
fn read_versioned<T: serde::de::DeserializeOwned>(
    value: &[u8],
    version: u32,
    refuse: impl Fn(String) -> Error,
) -> Result<T> {
    let json: serde_json::Value = serde_json::from_slice(value).map_err(|e| refuse(format!("not JSON: {e}")))?;
    match json.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(version) => {}
        Some(v) => return Err(refuse(format!("version {v}, this build reads version {version}"))),
        None => return Err(refuse("no version".into())),
    }
    serde_json::from_value(json).map_err(|e| refuse(format!("malformed: {e}")))
}

/// A change a checked statement will make.
pub(super) enum Effect {
    CatalogPut {
        name: String,
        definition: String,
    },
    CatalogDelete {
        name: String,
    },
    MarkerPut {
        key: String,
        marker: Marker,
    },
    CreateTopic {
        topic: String,
        spec: TopicSpec,
    },
    /// Rows for a table topic whose end the batch predicted to be `start`
    /// (its markers record offsets from there).
    TableWrite {
        topic: String,
        start: u64,
        records: Vec<TopicRecord>,
    },
}

impl Session {
    pub(super) fn load(&mut self) -> Result<()> {
        let mut latest: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> = BTreeMap::new();
        for record in self.topics.read_all(CATALOG_TOPIC)? {
            let Some(key) = record.key else {
                return Err(Error::Catalog { offset: record.offset, message: "a record without a key".into() });
            };
            latest.insert(key, (record.offset, record.value));
        }
        for (key, (offset, value)) in latest {
            let Some(value) = value else { continue };
            let key = String::from_utf8(key)
                .map_err(|_| Error::Catalog { offset, message: "a key that is not UTF-8".into() })?;
            if key.starts_with(MARKER_PREFIX) {
                let marker = Marker::read(&key, offset, &value)?;
                self.markers.insert(key, marker);
                continue;
            }
            if key.starts_with(TABLE_END_PREFIX) {
                let end = TableEnd::read(&key, offset, &value)?;
                self.committed.insert(end.topic, end.end);
                continue;
            }
            let text = String::from_utf8(value)
                .map_err(|_| Error::Catalog { offset, message: "a definition that is not UTF-8".into() })?;
            let statements = parse(&text, None).map_err(|e| Error::Catalog { offset, message: e.to_string() })?;
            let [statement] = statements.as_slice() else {
                return Err(Error::Catalog { offset, message: "not exactly one statement".into() });
            };
            let object =
                self.object_of(statement).map_err(|e| Error::Catalog { offset, message: format!("{key}: {e}") })?;
            self.catalog.objects.insert(object.name.clone(), object);
        }
        self.drop_cut_markers()?;
        // Tables of a directory written before committed ends existed: all theirs is committed.
        let catalog = self.catalog.clone();
        self.commit_ends(&catalog, &BTreeMap::new(), Vec::new())?;
        self.take_back_uncommitted()
    }

    /// Deletes the markers whose rows a crash kept out of their table: its
    /// end is short of them, or it is gone. Only directories written before
    /// the rows went first (catalog format before table ends) have any.
    pub(super) fn drop_cut_markers(&mut self) -> Result<()> {
        let mut cut = Vec::new();
        for (key, marker) in &self.markers {
            let end = if self.topics.exists(&marker.topic) { self.topics.end_offset(&marker.topic, 0)? } else { 0 };
            if marker.records > 0 && end < marker.offset.saturating_add(marker.records) {
                cut.push(key.clone());
            }
        }
        let tombstones =
            cut.iter().map(|key| TopicRecord { key: Some(key.clone().into_bytes()), value: None, headers: vec![] });
        self.topics.append(CATALOG_TOPIC, tombstones.collect())?;
        for key in cut {
            self.markers.remove(&key);
        }
        Ok(())
    }

    /// Takes back every table topic's records past its committed end (see
    /// the module docs) and commits the new ends. Idempotent: a crash
    /// during it leaves the same keys to take back from the same values.
    pub(super) fn take_back_uncommitted(&mut self) -> Result<()> {
        let mut ends = BTreeMap::new();
        for (topic, committed) in &self.committed {
            if !self.topics.exists(topic) {
                continue;
            }
            let end = self.topics.end_offset(topic, 0)?;
            if end > *committed {
                ends.insert(topic.clone(), self.take_back(topic, *committed)?);
            }
        }
        self.commit_ends(&Catalog::default(), &ends, Vec::new())?;
        self.uncommitted = false;
        self.bounds_behind = true;
        self.raise_bounds()
    }

    /// Appends, for each key written at or past `committed` in `topic`, its
    /// value below it (a tombstone if it had none); returns the new end.
    fn take_back(&self, topic: &str, committed: u64) -> Result<u64> {
        let mut before: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let mut touched = BTreeSet::new();
        for record in self.topics.read_all(topic)? {
            let Some(key) = record.key else {
                return Err(Error::Catalog {
                    offset: record.offset,
                    message: format!("table topic \"{topic}\" holds a record without a key"),
                });
            };
            if record.offset < committed {
                before.insert(key, record.value);
            } else {
                touched.insert(key);
            }
        }
        let records: Vec<TopicRecord> = touched
            .into_iter()
            .map(|key| TopicRecord { value: before.remove(&key).flatten(), key: Some(key), headers: vec![] })
            .collect();
        self.topics.append(topic, records)?;
        Ok(self.topics.end_offset(topic, 0)?)
    }

    /// Appends `records` and a committed end for each of `ends` and for every
    /// table of `catalog` without one (at its topic's end), in one append.
    fn commit_ends(
        &mut self,
        catalog: &Catalog,
        ends: &BTreeMap<String, u64>,
        mut records: Vec<TopicRecord>,
    ) -> Result<()> {
        let mut ends = ends.clone();
        for object in catalog.objects.values() {
            if let ObjectKind::Table { topic, .. } = &object.kind
                && !ends.contains_key(topic)
                && !self.committed.contains_key(topic)
            {
                let end = if self.topics.exists(topic) { self.topics.end_offset(topic, 0)? } else { 0 };
                ends.insert(topic.clone(), end);
            }
        }
        records.extend(ends.iter().map(|(topic, end)| TableEnd::record(topic, *end)));
        self.topics.append(CATALOG_TOPIC, records)?;
        // Committed: nothing after this point may fail the batch. Only the
        // ends just committed moved; a failure leaves every bound to retry.
        let raised = ends
            .iter()
            .filter(|(topic, _)| self.topics.exists(topic))
            .try_for_each(|(topic, end)| self.topics.set_cleanable_below(topic, 0, *end));
        self.committed.extend(ends);
        self.bounds_behind |= raised.is_err();
        Ok(())
    }

    /// Lets compaction of every table topic reach its committed end. A
    /// failure leaves the lower bound in force (safe: less is compacted) and
    /// is retried before the next batch.
    pub(super) fn raise_bounds(&mut self) -> Result<()> {
        if !self.bounds_behind {
            return Ok(());
        }
        for (topic, end) in &self.committed {
            if self.topics.exists(topic) {
                self.topics.set_cleanable_below(topic, 0, *end)?;
            }
        }
        self.bounds_behind = false;
        Ok(())
    }

    /// Applies a checked batch: topics and rows, then the catalog append
    /// that commits it (with the new committed ends). If anything fails
    /// after rows went out, they are taken back before the error returns
    /// (or, if that fails too, before the next batch is planned).
    pub(super) fn apply(&mut self, effects: Vec<Effect>, working: &Catalog) -> Result<()> {
        assert!(!self.uncommitted, "a batch is planned only after the last one's rows were taken back");
        let mut ends = BTreeMap::new();
        let result = self.write_rows(&effects, &mut ends).and_then(|()| {
            let records = effects.iter().filter_map(catalog_record).collect();
            self.commit_ends(working, &ends, records)
        });
        if let Err(error) = result {
            self.uncommitted = true;
            // Best effort now; on failure the next batch (or session) tries again.
            let _ = self.take_back_uncommitted();
            return Err(error);
        }
        self.uncommitted = false;
        for effect in effects {
            match effect {
                Effect::MarkerPut { key, marker } => {
                    self.markers.insert(key, marker);
                }
                Effect::CatalogDelete { name } if name.starts_with(MARKER_PREFIX) => {
                    self.markers.remove(&name);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Creates the batch's topics and appends its table rows, each where
    /// the batch predicted (its markers say so); records each table's end.
    fn write_rows(&mut self, effects: &[Effect], ends: &mut BTreeMap<String, u64>) -> Result<()> {
        // A topic without a committed end (a table this batch creates) gets
        // one first, at its end now: what it gets from here can be taken back.
        let mut fresh = BTreeMap::new();
        for effect in effects {
            if let Effect::TableWrite { topic, start, .. } = effect
                && !self.committed.contains_key(topic)
            {
                fresh.entry(topic.clone()).or_insert(*start);
            }
        }
        if !fresh.is_empty() {
            self.commit_ends(&Catalog::default(), &fresh, Vec::new())?;
        }
        for effect in effects {
            match effect {
                Effect::CreateTopic { topic, spec } => {
                    self.topics.ensure(topic, *spec)?;
                }
                Effect::TableWrite { topic, start, records } => {
                    self.topics.ensure(topic, TABLE_TOPIC_SPEC)?;
                    let end = self.topics.end_offset(topic, 0)?;
                    if end != *start {
                        return Err(Error::Catalog {
                            offset: end,
                            message: format!(
                                "table topic \"{topic}\" ends at {end}, not at {start} as the batch read it: \
                                 something else wrote it"
                            ),
                        });
                    }
                    self.uncommitted = true;
                    self.topics.append(topic, records.clone())?;
                    ends.insert(topic.clone(), self.topics.end_offset(topic, 0)?);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The catalog record of an effect, if it has one.
fn catalog_record(effect: &Effect) -> Option<TopicRecord> {
    let (name, value) = match effect {
        Effect::CatalogPut { name, definition } => (name, Some(definition.clone().into_bytes())),
        Effect::CatalogDelete { name } => (name, None),
        Effect::MarkerPut { key, marker } => (key, Some(serde_json::to_vec(marker).expect("a marker serializes"))),
        Effect::CreateTopic { .. } | Effect::TableWrite { .. } => return None,
    };
    Some(TopicRecord { key: Some(name.clone().into_bytes()), value, headers: vec![] })
}
