//! The layout of a view's index (keyspace `vidx.NAME`, view index layouts 1 and 2):
//! one entry per row the view holds, keyed by the row's 128-bit keyed hash
//! ([`RowHash`]), valued by its multiplicity and the offset of the
//! changelog record that last wrote it ([`IndexEntry`]). The row itself
//! lives only in the changelog.
//!
//! Why a hash and not the row: the index is written once per change of
//! every view, and its bytes are what RocksDB's memtable, WAL, flushes and
//! compactions copy (measured at stop 37: leaving a pass-through view's
//! index out entirely halved its run with 2 workers). A 16-byte key and a
//! 16-byte value are a fraction of a JSON row.
//!
//! The hash is SipHash-1-3 with 128 bits of output, keyed by a random key
//! drawn when the index is first opened and kept in the index itself (the
//! entry with the empty key, [`HASHER_ENTRY`]): rows are user input, and a
//! keyed hash is what keeps anyone who does not hold the data directory
//! from choosing two rows that collide. Two distinct rows of one view
//! collide with probability about n² / 2¹²⁹ for n rows (below 10⁻²⁰ for
//! 10⁹ rows); the index treats equal hashes as equal rows.
//!
//! A view whose rows are unique by construction ([`crate::Multiplicity::Unique`])
//! keeps no row entries (view index layout 2): its hasher entry says so
//! ([`Head::holds_rows`] false), the applier only moves its marker, and
//! its fold reads nothing (a retracted row was held once, an inserted one
//! was not). The changelog alone records its rows; a replacement of its
//! definition, which must retract them, first replays the changelog into
//! row entries ([`crate::view_state::index_rows`]) and the index holds rows
//! from then on. Why: such a view's index is never read but at a
//! replacement, and writing it was a fifth of a 9 M-key aggregation's run
//! (docs/performance.md, stop 41).
//!
//! Invariants:
//! - every key of the keyspace is either the hasher entry (empty) or a
//!   row's hash ([`ROW_KEY_BYTES`]); every row entry's value is
//!   [`ENTRY_BYTES`] long with a non-zero multiplicity;
//! - the hasher entry is written (synced) before any row entry; its hash
//!   key never changes while the keyspace exists (every row entry was keyed
//!   with it), and its [`Head::holds_rows`] changes once at most, from false
//!   to true, in the synced batch after the replay that wrote every row;
//! - an index that does not hold rows is read by no fold (row entries a
//!   replay left before a crash are deleted when the next replay starts);
//! - a row's hash routes it to a worker by its high half and places it in
//!   a fold's filter by its low half, so both are independent of the
//!   worker count and of each other.

use millpond_log::Log;
use siphasher::sip128::SipHasher13;

use crate::error::{Error, Result};
use crate::state::{Keyspace, StateStore, WriteBatch};

/// The prefix of a view's index keyspace (`vidx.NAME`).
pub(crate) const INDEX_KEYSPACE_PREFIX: &str = "vidx.";
/// The key of the entry that holds the hash key (no row's key is empty).
pub(crate) const HASHER_ENTRY: &[u8] = b"";
/// The bytes of a row entry's key: its hash.
pub(crate) const ROW_KEY_BYTES: usize = 16;
/// The least key a row entry can have: a scan from it skips the hasher entry.
pub(crate) const FIRST_ROW_KEY: &[u8] = &[0];
/// The bytes of a row entry's value: multiplicity, then changelog offset.
pub(crate) const ENTRY_BYTES: usize = 16;

/// The index keyspace of view `name`.
pub(crate) fn index_keyspace(name: &str) -> String {
    format!("{INDEX_KEYSPACE_PREFIX}{name}")
}

/// A row's 128-bit keyed hash: its key in the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub(crate) struct RowHash(pub(crate) u128);

impl RowHash {
    /// The key of the row's entry (big-endian, so entries sort by hash).
    pub(crate) fn key(self) -> [u8; ROW_KEY_BYTES] {
        self.0.to_be_bytes()
    }

    /// The hash of a row entry's key; `None` for the hasher entry.
    pub(crate) fn from_key(key: &[u8]) -> Option<RowHash> {
        <[u8; ROW_KEY_BYTES]>::try_from(key).ok().map(|bytes| RowHash(u128::from_be_bytes(bytes)))
    }

    /// [`RowHash::from_key`] of a key read from index `what`, where a key
    /// that is neither the hasher entry nor a hash is corrupt.
    pub(crate) fn from_index_key(key: &[u8], what: &str) -> Result<Option<RowHash>> {
        match RowHash::from_key(key) {
            None if key != HASHER_ENTRY => Err(Error::CorruptState {
                what: what.to_owned(),
                reason: format!("a key of {} bytes is neither its hash key nor a row's hash", key.len()),
            }),
            hash => Ok(hash),
        }
    }

    /// What routes the row to a worker (`route % workers`).
    pub(crate) fn route(self) -> u64 {
        (self.0 >> 64) as u64
    }

    /// The row's hash for a fold's filter (independent of [`RowHash::route`]).
    pub(crate) fn filter(self) -> u64 {
        self.0 as u64
    }

    /// Whether worker `worker.0` of `worker.1` owns the row (timely's
    /// exchange sends a datum to worker `route % workers`).
    pub(crate) fn owned_by(self, worker: (usize, usize)) -> bool {
        self.route() % worker.1 as u64 == worker.0 as u64
    }
}

/// The keyed hash of one view's rows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowHasher {
    keys: (u64, u64),
}

impl RowHasher {
    /// A hasher with the given key: tests, and the placeholder of a view
    /// whose build failed (no row flows then). An index draws its own.
    pub(crate) fn with_keys(key0: u64, key1: u64) -> RowHasher {
        RowHasher { keys: (key0, key1) }
    }

    pub(crate) fn hash(&self, row: &[u8]) -> RowHash {
        RowHash(SipHasher13::new_with_keys(self.keys.0, self.keys.1).hash(row).as_u128())
    }

    /// A hasher with a fresh random key (drawn as a topic id is: from
    /// std's per-process random keys, seeded from the OS).
    fn random() -> RowHasher {
        let key = millpond_log::TopicId::random().as_u128();
        RowHasher { keys: ((key >> 64) as u64, key as u64) }
    }

    fn encode(&self) -> Vec<u8> {
        let mut bytes = self.keys.0.to_be_bytes().to_vec();
        bytes.extend_from_slice(&self.keys.1.to_be_bytes());
        bytes
    }

    fn decode(bytes: &[u8], what: &str) -> Result<RowHasher> {
        let keys = <[u8; 16]>::try_from(bytes).map_err(|_| Error::CorruptState {
            what: what.to_owned(),
            reason: format!("its hash key is {} bytes, not 16", bytes.len()),
        })?;
        let half = |at: usize| u64::from_be_bytes(keys[at..at + 8].try_into().expect("8 bytes"));
        Ok(RowHasher { keys: (half(0), half(8)) })
    }
}

/// What an index's hasher entry holds: the hash key, and whether the
/// index holds an entry per row (layout 1: 16 bytes, the key) or none
/// (layout 2: the key, then one byte [`NO_ROWS`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Head {
    pub(crate) hasher: RowHasher,
    pub(crate) holds_rows: bool,
}

/// The last byte of a hasher entry whose index holds no row entries.
const NO_ROWS: u8 = 0;

impl Head {
    pub(crate) fn encode(self) -> Vec<u8> {
        let mut bytes = self.hasher.encode();
        if !self.holds_rows {
            bytes.push(NO_ROWS);
        }
        bytes
    }

    fn decode(bytes: &[u8], what: &str) -> Result<Head> {
        match bytes.split_at_checked(16) {
            Some((key, [])) => Ok(Head { hasher: RowHasher::decode(key, what)?, holds_rows: true }),
            Some((key, [NO_ROWS])) => Ok(Head { hasher: RowHasher::decode(key, what)?, holds_rows: false }),
            _ => Err(Error::CorruptState {
                what: what.to_owned(),
                reason: format!("its hasher entry is {} bytes, not 16 or 16 and a 0", bytes.len()),
            }),
        }
    }
}

/// The head of the index in `keyspace`, if it has one yet.
pub(crate) fn head(store: &dyn StateStore, keyspace: Keyspace, what: &str) -> Result<Option<Head>> {
    store.get(keyspace, HASHER_ENTRY)?.map(|bytes| Head::decode(&bytes, what)).transpose()
}

/// The hasher of the index in `keyspace`, drawn and committed (synced)
/// first if the index has none, as one that holds rows (tests).
#[cfg(test)]
pub(crate) fn hasher_or_create(store: &dyn StateStore, keyspace: Keyspace, what: &str) -> Result<RowHasher> {
    head_or_create(store, keyspace, what, true).map(|head| head.hasher)
}

/// The head of the index in `keyspace`, drawn and committed (synced)
/// first if the index has none, holding rows or not as `holds_rows` says.
/// Callers that may race (workers building one view) hold one lock around
/// it ([`crate::checkpoint::Checkpoints::view_hasher`]).
pub(crate) fn head_or_create(store: &dyn StateStore, keyspace: Keyspace, what: &str, holds_rows: bool) -> Result<Head> {
    if let Some(head) = head(store, keyspace, what)? {
        return Ok(head);
    }
    let mut rows = 0;
    store.scan_keys_from(keyspace, &[], 1, &mut |_| rows += 1)?;
    if rows > 0 {
        let reason = "it holds rows but no hash key (a damaged state directory)".to_owned();
        return Err(Error::CorruptState { what: what.to_owned(), reason });
    }
    let head = Head { hasher: RowHasher::random(), holds_rows };
    let mut batch = WriteBatch::new();
    batch.put_owned(keyspace, HASHER_ENTRY.to_vec(), head.encode());
    store.commit(batch, true)?;
    Ok(head)
}

/// A row entry's value: the row's multiplicity (never 0: a row at 0 has
/// no entry) and the offset of its last changelog record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub(crate) count: i64,
    pub(crate) offset: u64,
}

impl IndexEntry {
    pub(crate) fn encode(self) -> Vec<u8> {
        assert_ne!(self.count, 0, "a row at multiplicity 0 has no entry");
        let mut bytes = Vec::with_capacity(ENTRY_BYTES);
        bytes.extend_from_slice(&self.count.to_be_bytes());
        bytes.extend_from_slice(&self.offset.to_be_bytes());
        bytes
    }

    pub(crate) fn decode(bytes: &[u8], what: &str) -> Result<IndexEntry> {
        let corrupt = |reason: String| Error::CorruptState { what: what.to_owned(), reason };
        let bytes = <[u8; ENTRY_BYTES]>::try_from(bytes)
            .map_err(|_| corrupt(format!("an index entry is {} bytes, not {ENTRY_BYTES}", bytes.len())))?;
        let count = i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
        let offset = u64::from_be_bytes(bytes[8..].try_into().expect("8 bytes"));
        if count == 0 {
            return Err(corrupt("an index entry holds a multiplicity of 0".into()));
        }
        Ok(IndexEntry { count, offset })
    }
}

/// The distinct rows of a view's committed index (a view whose checkpoint
/// did not count them): its row entries, not its hasher entry.
pub(crate) fn count_rows(state: &crate::opstate::OperatorState, what: &str) -> Result<u64> {
    let mut rows = 0;
    state.scan_committed(|key, _| {
        rows += u64::from(RowHash::from_index_key(key, what)?.is_some());
        Ok(())
    })?;
    Ok(rows)
}

/// A row the index holds: its last changelog record's offset, its hash
/// and its multiplicity.
pub(crate) type HeldRow = (u64, RowHash, i64);

/// Bytes per fetch of [`read_rows_at`].
const READ_FETCH_BYTES: usize = 256 << 10;

/// Reads the rows of `held` (sorted by offset, each the last record of its
/// row in changelog `topic`, as the committed index gives them) from the
/// changelog in one forward pass, handing each to `f` with its row. A
/// record that is not there, or does not hold what the index says, is a
/// corrupt changelog (or index) named by its offset.
pub(crate) fn read_rows_at(
    log: &Log,
    topic: &str,
    held: &[HeldRow],
    mut f: impl FnMut(HeldRow, &[u8]) -> std::result::Result<(), String>,
) -> Result<()> {
    let corrupt = |offset: u64, reason: String| Error::CorruptChangelog { view: topic.to_owned(), offset, reason };
    if let Some(pair) = held.windows(2).find(|pair| pair[0].0 >= pair[1].0) {
        return Err(corrupt(pair[1].0, "the view's index gives one changelog offset for two rows".into()));
    }
    let mut at = 0;
    while let Some(&(offset, _, _)) = held.get(at) {
        let fetch = log
            .fetch(topic, 0, offset, READ_FETCH_BYTES)
            .map_err(|e| Error::at(format!("reading {topic} at offset {offset} (a row the view's index holds)"), e))?;
        for record in fetch.records() {
            let Some(&wanted) = held.get(at) else { break };
            if record.offset < wanted.0 {
                continue;
            }
            if record.offset > wanted.0 {
                return Err(corrupt(wanted.0, "the index gives an offset the changelog does not hold".into()));
            }
            let row = record.key.ok_or_else(|| corrupt(record.offset, "a changelog record has no key".into()))?;
            let count = record.value.and_then(|value| <[u8; 8]>::try_from(value).ok()).map(i64::from_be_bytes);
            if count != Some(wanted.2) {
                let reason = format!("the record holds multiplicity {count:?}, the index {}", wanted.2);
                return Err(corrupt(record.offset, reason));
            }
            f(wanted, row).map_err(|reason| corrupt(record.offset, reason))?;
            at += 1;
        }
        if held.get(at).is_some_and(|&(next, _, _)| next == offset) {
            return Err(corrupt(offset, "the changelog ends before an offset the index gives".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemoryStore;

    #[test]
    fn an_entry_round_trips_and_a_bad_one_is_named() {
        let entry = IndexEntry { count: -3, offset: 77 };
        assert_eq!(IndexEntry::decode(&entry.encode(), "v").unwrap(), entry);
        let short = IndexEntry::decode(&[0; 8], "view index 'v'").unwrap_err().to_string();
        assert!(short.contains("view index 'v'") && short.contains("8 bytes"), "{short}");
        assert!(IndexEntry::decode(&[0; 16], "v").is_err(), "a multiplicity of 0 is corrupt");
    }

    /// A head round-trips with its mark (16 bytes: rows; 17, the last 0:
    /// none), is created as asked and then read back as it is; any other
    /// length or last byte is corrupt, named.
    #[test]
    fn a_head_says_whether_its_index_holds_rows() {
        let hasher = RowHasher::with_keys(7, 9);
        for holds_rows in [true, false] {
            let bytes = Head { hasher, holds_rows }.encode();
            assert_eq!(bytes.len(), if holds_rows { 16 } else { 17 });
            let head = Head::decode(&bytes, "v").unwrap();
            assert_eq!((head.holds_rows, head.hasher.keys), (holds_rows, (7, 9)));
        }
        for bad in [&[0u8; 15][..], &[0; 18], &[[0; 16].as_slice(), &[1]].concat()] {
            let refused = Head::decode(bad, "the index of view 'v'").unwrap_err().to_string();
            assert!(refused.contains("the index of view 'v'") && refused.contains("hasher entry"), "{refused}");
        }
        let store = MemoryStore::new();
        let space = store.keyspace("vidx.u").unwrap();
        let created = head_or_create(&store, space, "u", false).unwrap();
        assert!(!created.holds_rows);
        let again = head_or_create(&store, space, "u", true).unwrap();
        assert_eq!((again.holds_rows, again.hasher.keys), (false, created.hasher.keys), "an index keeps its head");
    }

    /// The key is drawn once and then read back; two indexes get two keys,
    /// so the same row hashes differently in each.
    #[test]
    fn an_index_keeps_the_hash_key_it_drew() {
        let store = MemoryStore::new();
        let (a, b) = (store.keyspace("vidx.a").unwrap(), store.keyspace("vidx.b").unwrap());
        let first = hasher_or_create(&store, a, "a").unwrap();
        let again = hasher_or_create(&store, a, "a").unwrap();
        let other = hasher_or_create(&store, b, "b").unwrap();
        let row = br#"{"x":1}"#;
        assert_eq!(first.hash(row), again.hash(row));
        assert_ne!(first.hash(row), other.hash(row));
        assert_eq!(RowHash::from_key(&first.hash(row).key()), Some(first.hash(row)));
        assert_eq!(RowHash::from_key(HASHER_ENTRY), None);
        // An index whose hash key is gone cannot be read or written again.
        let c = store.keyspace("vidx.c").unwrap();
        let mut batch = WriteBatch::new();
        batch.put(c, &first.hash(row).key(), &IndexEntry { count: 1, offset: 0 }.encode());
        store.commit(batch, true).unwrap();
        let refused = hasher_or_create(&store, c, "the index of view 'c'").unwrap_err().to_string();
        assert!(refused.contains("the index of view 'c'") && refused.contains("no hash key"), "{refused}");
    }
}
