//! Catalog persistence: loading the catalog topic (objects and DML
//! markers), deleting markers a crash cut, and applying a batch's effects
//! (catalog records in one append, then topics and table rows).
use super::*;

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
        let json: serde_json::Value = serde_json::from_slice(value).map_err(|e| refuse(format!("not JSON: {e}")))?;
        match json.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(MARKER_VERSION) => {}
            Some(v) => return Err(refuse(format!("version {v}, this build reads version {MARKER_VERSION}"))),
            None => return Err(refuse("no version".into())),
        }
        serde_json::from_value(json).map_err(|e| refuse(format!("malformed: {e}")))
    }
}

/// A change a checked statement will make.
pub(super) enum Effect {
    CatalogPut { name: String, definition: String },
    CatalogDelete { name: String },
    MarkerPut { key: String, marker: Marker },
    CreateTopic { topic: String, spec: TopicSpec },
    TableWrite { topic: String, records: Vec<TopicRecord> },
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
        self.drop_cut_markers()
    }

    /// Deletes the markers whose rows a crash kept out of their table (see
    /// the module docs): its end is short of them, or it is gone.
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

    pub(super) fn apply(&mut self, effects: Vec<Effect>) -> Result<()> {
        // Catalog first, in one append (one batch: all or nothing), then topics and rows.
        let mut catalog_records = Vec::new();
        for effect in &effects {
            match effect {
                Effect::CatalogPut { name, definition } => catalog_records.push(TopicRecord {
                    key: Some(name.clone().into_bytes()),
                    value: Some(definition.clone().into_bytes()),
                    headers: vec![],
                }),
                Effect::CatalogDelete { name } => catalog_records.push(TopicRecord {
                    key: Some(name.clone().into_bytes()),
                    value: None,
                    headers: vec![],
                }),
                Effect::MarkerPut { key, marker } => catalog_records.push(TopicRecord {
                    key: Some(key.clone().into_bytes()),
                    value: Some(serde_json::to_vec(marker).expect("a marker serializes")),
                    headers: vec![],
                }),
                _ => {}
            }
        }
        self.topics.append(CATALOG_TOPIC, catalog_records)?;
        for effect in effects {
            match effect {
                Effect::CreateTopic { topic, spec } => {
                    self.topics.ensure(&topic, spec)?;
                }
                Effect::TableWrite { topic, records } => {
                    self.topics.ensure(&topic, TopicSpec { partitions: 1, compacted: true })?;
                    self.topics.append(&topic, records)?;
                }
                Effect::MarkerPut { key, marker } => {
                    self.markers.insert(key, marker);
                }
                Effect::CatalogDelete { name } if name.starts_with(MARKER_PREFIX) => {
                    self.markers.remove(&name);
                }
                Effect::CatalogPut { .. } | Effect::CatalogDelete { .. } => {}
            }
        }
        Ok(())
    }
}
