//! Topic metadata (`meta.json`) and topic incarnation ids.
//!
//! A topic's `meta.json` holds its name, its [`TopicId`] and its config, as
//! versioned JSON. Version 2 (written now) has the id; version 1 (older
//! logs) has none: the owner of the log assigns one when it opens the topic
//! and rewrites the file atomically (temp file, fsync, rename, directory
//! fsync), so a crash leaves either the old file or the new one.
//!
//! Invariants: a topic's id is fixed from the moment its `meta.json` holds
//! it; a topic created again under the same name (after a delete) gets a new
//! id, so an id names one incarnation of a topic, as Kafka's topic ids do.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::storage::{self, RealStorage, Storage};

/// The `meta.json` version written now.
pub(crate) const META_VERSION: u32 = 2;
/// The oldest version still read (it has no id).
const META_VERSION_NO_ID: u32 = 1;
pub(crate) const META_FILE: &str = "meta.json";
const META_TMP_FILE: &str = "meta.json.tmp";

/// A topic incarnation's 128-bit random id. Shown (and serialized) as 32
/// lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicId(u128);

impl TopicId {
    /// A fresh random id. No dependency: two SipHash-1-3 hashes keyed by
    /// std's per-process random keys (`RandomState`, seeded from the OS) over
    /// the time, the process id and a process-wide counter.
    pub fn random() -> TopicId {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let state = std::collections::hash_map::RandomState::new();
        let half = |salt: u64| {
            let mut hasher = state.build_hasher();
            hasher.write_u64(salt);
            hasher.write_u128(nanos);
            hasher.write_u32(std::process::id());
            hasher.write_u64(count);
            hasher.finish()
        };
        let id = (u128::from(half(0x6d69_6c6c)) << 64) | u128::from(half(0x706f_6e64));
        // Zero is reserved, never produced (so it can never pass for a real id).
        TopicId(id.max(1))
    }

    pub fn as_u128(self) -> u128 {
        self.0
    }
}

impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TopicId({self})")
    }
}

impl std::str::FromStr for TopicId {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<TopicId, String> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(format!("a topic id is 32 lowercase hex digits, got '{text}'"));
        }
        let id = u128::from_str_radix(text, 16).map_err(|e| e.to_string())?;
        if id == 0 {
            return Err("the topic id 0 is reserved".into());
        }
        Ok(TopicId(id))
    }
}

impl Serialize for TopicId {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TopicId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<TopicId, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `meta.json` as stored.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TopicMeta {
    pub(crate) version: u32,
    pub(crate) name: String,
    /// Absent only in version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<TopicId>,
    pub(crate) config: TopicConfig,
}

/// A topic's checked metadata: name, id and config.
#[derive(Debug)]
pub(crate) struct Meta {
    pub(crate) id: TopicId,
    pub(crate) config: TopicConfig,
}

fn meta_path(topic_dir: &Path) -> PathBuf {
    topic_dir.join(META_FILE)
}

/// Parses and checks `meta.json` of topic `name`. A version-1 file comes back
/// with `id: None`.
fn read_meta(storage: &dyn Storage, topic_dir: &Path, name: &str) -> Result<(Option<TopicId>, TopicConfig)> {
    let path = meta_path(topic_dir);
    let text = storage.read(&path).map_err(Error::io("reading", &path))?;
    let meta: TopicMeta =
        serde_json::from_slice(&text).map_err(|e| Error::BadMetadata { path: path.clone(), reason: e.to_string() })?;
    let bad = |reason: String| Err(Error::BadMetadata { path: path.clone(), reason });
    if meta.name != name {
        return bad(format!("expected name '{name}', found '{}'", meta.name));
    }
    match (meta.version, meta.id) {
        (META_VERSION, Some(_)) | (META_VERSION_NO_ID, None) => {}
        (META_VERSION, None) => return bad(format!("version {META_VERSION} needs an id")),
        (META_VERSION_NO_ID, Some(_)) => return bad(format!("version {META_VERSION_NO_ID} has no id field")),
        (version, _) => {
            return bad(format!(
                "unsupported version {version} (this build reads {META_VERSION_NO_ID} and {META_VERSION})"
            ));
        }
    }
    meta.config.validate()?;
    Ok((meta.id, meta.config))
}

/// Writes a version-2 `meta.json` into `topic_dir` (which may be a topic
/// being built) and syncs it. Not atomic by itself: used on a directory no
/// one else sees yet.
pub(crate) fn write_new(
    storage: &dyn Storage,
    topic_dir: &Path,
    name: &str,
    id: TopicId,
    config: &TopicConfig,
) -> Result<()> {
    write_file(storage, &meta_path(topic_dir), name, id, config)
}

fn write_file(storage: &dyn Storage, path: &Path, name: &str, id: TopicId, config: &TopicConfig) -> Result<()> {
    let meta = TopicMeta { version: META_VERSION, name: name.to_owned(), id: Some(id), config: config.clone() };
    let text = serde_json::to_vec_pretty(&meta).expect("topic metadata serializes");
    storage::write_file(storage, path, &text, true).map_err(Error::io("writing", path))
}

/// Replaces `topic_dir`'s `meta.json` atomically: the new file is written
/// and synced as `meta.json.tmp`, renamed over the old one, and the
/// directory synced. A crash leaves the old file or the new one (a leftover
/// temp file is removed by the next open).
pub(crate) fn replace(
    storage: &dyn Storage,
    topic_dir: &Path,
    name: &str,
    id: TopicId,
    config: &TopicConfig,
) -> Result<()> {
    let tmp = topic_dir.join(META_TMP_FILE);
    write_file(storage, &tmp, name, id, config)?;
    let path = meta_path(topic_dir);
    storage.rename(&tmp, &path).map_err(Error::io("replacing", &path))?;
    crate::partition::sync_dir(storage, topic_dir)
}

/// Reads topic `name`'s metadata for the log's owner; a version-1 file gets
/// an id, persisted atomically (temp + fsync, rename, directory fsync)
/// before this returns.
pub(crate) fn load_or_upgrade(storage: &dyn Storage, topic_dir: &Path, name: &str) -> Result<Meta> {
    let tmp = topic_dir.join(META_TMP_FILE);
    match storage.remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io("removing", &tmp)(e)),
        _ => {} // an upgrade interrupted before its rename: the old file stands
    }
    let (id, config) = read_meta(storage, topic_dir, name)?;
    let id = match id {
        Some(id) => id,
        None => {
            let id = TopicId::random();
            replace(storage, topic_dir, name, id, &config)?;
            id
        }
    };
    Ok(Meta { id, config })
}

/// The id of `topic` in the data directory `data_dir`, read from its
/// `meta.json` without opening the log (for processes that do not hold its
/// lock, like view readers). A topic whose metadata is still version 1 (no
/// owner has opened it since it was written by an older build) has no id
/// yet: [`Error::BadMetadata`].
pub fn read_topic_id(data_dir: impl AsRef<Path>, topic: &str) -> Result<TopicId> {
    let topic_dir = data_dir.as_ref().join("topics").join(topic);
    if !topic_dir.is_dir() {
        return Err(Error::UnknownTopic(topic.to_owned()));
    }
    match read_meta(&RealStorage, &topic_dir, topic)? {
        (Some(id), _) => Ok(id),
        (None, _) => Err(Error::BadMetadata {
            path: meta_path(&topic_dir),
            reason: format!(
                "version {META_VERSION_NO_ID} metadata has no topic id yet (the log's owner assigns one when it opens the log)"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_as_32_hex_digits_and_parse_back() {
        let id = TopicId::random();
        let text = id.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(text.parse::<TopicId>().unwrap(), id);
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<TopicId>(&format!("\"{text}\"")).unwrap(), id);
        for bad in ["", "0", &"0".repeat(32), &"g".repeat(32), &"A".repeat(32), &"1".repeat(33)] {
            assert!(bad.parse::<TopicId>().is_err(), "{bad}");
        }
        assert_eq!(TopicId(1).to_string(), format!("{}1", "0".repeat(31)));
        assert_eq!(TopicId(u128::MAX).to_string(), "f".repeat(32));
    }

    #[test]
    fn ids_do_not_repeat() {
        let ids: std::collections::HashSet<TopicId> = (0..10_000).map(|_| TopicId::random()).collect();
        assert_eq!(ids.len(), 10_000);
    }
}
