//! Keyed operator state: one store per runtime, one keyspace per operator.
//!
//! A [`StateStore`] holds byte keys and values in named keyspaces. All
//! changes go through a [`WriteBatch`] that commits atomically, so a barrier
//! checkpoint can write an epoch's state changes, source offsets and sink
//! positions in one step: after a crash either all of a batch is there or
//! none of it is.
//!
//! Two backends implement the trait: [`RocksStore`] (RocksDB; state can
//! exceed memory and survives restarts) and [`MemoryStore`] (a `BTreeMap`;
//! tests and the in-memory baseline of the benchmarks).
//!
//! Invariants:
//! - A keyspace's name maps to the same [`Keyspace`] id for the life of the
//!   store, across restarts; the mapping is itself committed durably before
//!   the id is returned.
//! - Keyspaces never see each other's keys: every key is stored behind its
//!   keyspace's 4-byte id.
//! - `commit` is all or nothing, and with `sync` it is on disk when it
//!   returns.
//! - A batch applies its operations in order: a put after a
//!   [`WriteBatch::delete_keyspace`] of the same keyspace survives it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::epoch_writes::EpochWrites;
use crate::error::{Error, Result};

/// A keyspace handle, valid for the store that returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Keyspace(u32);

impl Keyspace {
    /// Keyspace 0 holds the store's own metadata (the keyspace registry).
    const REGISTRY: Keyspace = Keyspace(0);

    /// The stored keys of this keyspace: `[start, end)`. Ids stay below
    /// `u32::MAX` (the registry refuses to hand that one out), so `end` is
    /// the next id's prefix.
    fn range(self) -> (Vec<u8>, Vec<u8>) {
        let next = self.0.checked_add(1).expect("keyspace ids are below u32::MAX");
        (self.0.to_be_bytes().to_vec(), next.to_be_bytes().to_vec())
    }

    /// [`Keyspace::prefixed`] into `buffer` (cleared first).
    fn prefixed_into<'b>(self, key: &[u8], buffer: &'b mut Vec<u8>) -> &'b [u8] {
        buffer.clear();
        buffer.extend_from_slice(&self.0.to_be_bytes());
        buffer.extend_from_slice(key);
        buffer
    }

    fn prefixed(self, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + key.len());
        out.extend_from_slice(&self.0.to_be_bytes());
        out.extend_from_slice(key);
        out
    }
}

/// Longest keyspace name.
pub const KEYSPACE_NAME_BYTES_MAX: usize = 255;

/// One operation of a [`WriteBatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Put(Keyspace, Vec<u8>, Vec<u8>),
    Delete(Keyspace, Vec<u8>),
    /// Every key of the keyspace (one range delete, whatever its size).
    DeleteKeyspace(Keyspace),
    /// An operator's writes of one epoch, shared with its overlay.
    Epoch(Keyspace, Arc<EpochWrites>),
}

/// A set of puts and deletes applied at once. Later operations on the same
/// key win.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<Op>,
}

impl WriteBatch {
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }
    pub fn put(&mut self, keyspace: Keyspace, key: &[u8], value: &[u8]) {
        self.ops.push(Op::Put(keyspace, key.to_vec(), value.to_vec()));
    }
    pub fn delete(&mut self, keyspace: Keyspace, key: &[u8]) {
        self.ops.push(Op::Delete(keyspace, key.to_vec()));
    }
    /// Puts without copying.
    pub fn put_owned(&mut self, keyspace: Keyspace, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(Op::Put(keyspace, key, value));
    }
    /// Deletes without copying.
    pub fn delete_owned(&mut self, keyspace: Keyspace, key: Vec<u8>) {
        self.ops.push(Op::Delete(keyspace, key));
    }
    /// Deletes every key of `keyspace` (as of this point in the batch; its
    /// name keeps its id, so a keyspace of that name starts empty).
    pub fn delete_keyspace(&mut self, keyspace: Keyspace) {
        assert_ne!(keyspace, Keyspace::REGISTRY, "the keyspace registry is never deleted");
        self.ops.push(Op::DeleteKeyspace(keyspace));
    }
    /// Every write of `writes` (shared, not copied: an operator's overlay
    /// reads the same memory until the epoch is committed).
    pub(crate) fn put_epoch(&mut self, keyspace: Keyspace, writes: Arc<EpochWrites>) {
        self.ops.push(Op::Epoch(keyspace, writes));
    }
    /// Moves every operation of `other` after this batch's own.
    pub fn append(&mut self, other: &mut WriteBatch) {
        self.ops.append(&mut other.ops);
    }
    /// Operations, an epoch's writes counted one a key.
    pub fn len(&self) -> usize {
        self.ops.iter().map(|op| if let Op::Epoch(_, writes) = op { writes.len() } else { 1 }).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Where operators keep keyed state.
pub trait StateStore: Send + Sync + fmt::Debug {
    /// The keyspace called `name`, created (durably) on first use.
    fn keyspace(&self, name: &str) -> Result<Keyspace>;
    /// The value of `key`, as of the last commit.
    fn get(&self, keyspace: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Calls `f` on every entry whose key starts with `prefix`, in key order,
    /// until it returns false.
    fn scan_prefix(&self, keyspace: Keyspace, prefix: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()>;
    /// Calls `f` on the keys of `keyspace` from `start` on, in key order, at
    /// most `limit` of them (a scan done a step at a time).
    fn scan_keys_from(&self, keyspace: Keyspace, start: &[u8], limit: usize, f: &mut dyn FnMut(&[u8])) -> Result<()>;
    /// Applies `batch` atomically; with `sync`, durably before returning.
    fn commit(&self, batch: WriteBatch, sync: bool) -> Result<()>;
    /// Calls `f(i, value)` with the value of each of `keys` (in increasing
    /// byte order, each once), as of the last commit, in their order: one
    /// batched lookup where the backend has one (keys near each other share
    /// the reads of filter, index and data blocks).
    fn multi_get(&self, keyspace: Keyspace, keys: &[&[u8]], f: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        for (i, key) in keys.iter().enumerate() {
            f(i, self.get(keyspace, key)?.as_deref());
        }
        Ok(())
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > KEYSPACE_NAME_BYTES_MAX {
        return Err(Error::BadKeyspaceName(name.to_owned()));
    }
    Ok(())
}

/// The registry maps names to ids: `REGISTRY ++ "name:" ++ name -> id (u32 BE)`
/// and `REGISTRY ++ "next"` -> the next free id.
const REGISTRY_NAME_PREFIX: &[u8] = b"name:";
const REGISTRY_NEXT: &[u8] = b"next";

fn decode_id(bytes: &[u8]) -> Option<u32> {
    bytes.try_into().ok().map(u32::from_be_bytes)
}

/// Finds or creates `name` in the registry through the store's own get and
/// commit, holding `lock` so two callers cannot assign two ids.
fn registry_keyspace(store: &dyn StateStore, lock: &Mutex<()>, name: &str) -> Result<Keyspace> {
    check_name(name)?;
    let _guard = lock.lock().expect("registry lock");
    let name_key = [REGISTRY_NAME_PREFIX, name.as_bytes()].concat();
    let next = match store.get(Keyspace::REGISTRY, REGISTRY_NEXT)? {
        Some(bytes) => decode_id(&bytes)
            .filter(|&next| next >= 1)
            .ok_or_else(|| Error::CorruptRegistry(format!("next id is {bytes:?}")))?,
        None => 1,
    };
    if let Some(bytes) = store.get(Keyspace::REGISTRY, &name_key)? {
        // Assert on the way in: a registered id is in 1..next.
        return decode_id(&bytes)
            .filter(|&id| id >= 1 && id < next)
            .map(Keyspace)
            .ok_or_else(|| Error::CorruptRegistry(format!("id of '{name}' is {bytes:?} (next {next})")));
    }
    let after = next.checked_add(1).ok_or_else(|| Error::CorruptRegistry("keyspace ids exhausted".into()))?;
    let mut batch = WriteBatch::new();
    batch.put(Keyspace::REGISTRY, &name_key, &next.to_be_bytes());
    batch.put(Keyspace::REGISTRY, REGISTRY_NEXT, &after.to_be_bytes());
    store.commit(batch, true)?;
    Ok(Keyspace(next))
}

/// Keys of one batched lookup in RocksDB ([`StateStore::multi_get`]
/// splits longer lists): bounds the pinned blocks and the key buffer.
const MULTI_GET_KEYS_MAX: usize = 1024;

/// The default cap of RocksDB's block cache.
pub const STATE_CACHE_BYTES_DEFAULT: usize = 256 << 20;
/// Bloom filter bits per key in each table file: about 1 % false positives,
/// so a lookup of a key that is not there (every new row, every new group)
/// reads no data block.
const BLOOM_BITS_PER_KEY: f64 = 10.0;
/// The share of each memtable given to its bloom filter over whole keys: a
/// miss skips the skip list.
const MEMTABLE_BLOOM_RATIO: f64 = 0.1;
/// One memtable's size; up to [`WRITE_BUFFERS_MAX`] are held while flushing.
const WRITE_BUFFER_BYTES: usize = 64 << 20;
const WRITE_BUFFERS_MAX: i32 = 3;
/// The size of a partition of a table file's filter and index.
const METADATA_BLOCK_BYTES: usize = 4 << 10;
/// Table files' block size: larger blocks keep the index small when state
/// outgrows the cache.
const BLOCK_BYTES: usize = 16 << 10;

/// The database's options (docs/state.md, "RocksDB options").
fn rocks_options(cache: &rocksdb::Cache) -> rocksdb::Options {
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_block_cache(cache);
    table.set_block_size(BLOCK_BYTES);
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
    table.set_whole_key_filtering(true);
    // Index and filter blocks live in the (capped) cache, level 0's pinned.
    table.set_cache_index_and_filter_blocks(true);
    table.set_cache_index_and_filter_blocks_with_high_priority(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    // Partitioned: a table file's filter and index are blocks of
    // METADATA_BLOCK_BYTES under a small top level (pinned), so a lookup
    // loads one partition. Whole, a large file's filter (12 MiB for 10 M
    // keys) outgrows a cache shard, is never kept, and every point read
    // that misses read and checksummed all of it again (measured: 95 % of a
    // join's worker in XXH3 and the copy of that block, 50 µs a record).
    table.set_index_type(rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_partition_filters(true);
    table.set_metadata_block_size(METADATA_BLOCK_BYTES);
    table.set_pin_top_level_index_and_filter(true);
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    options.set_block_based_table_factory(&table);
    // Flushes and the first compactions write uncompressed: they are the
    // background work that competes with the runtime for the cores.
    use rocksdb::DBCompressionType::{Lz4, None as Plain};
    options.set_compression_per_level(&[Plain, Plain, Lz4, Lz4, Lz4, Lz4, Lz4]);
    if let Ok(mut env) = rocksdb::Env::new() {
        env.lower_thread_pool_cpu_priority();
        env.lower_high_priority_thread_pool_cpu_priority();
        options.set_env(&env);
    }
    options.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO);
    options.set_memtable_whole_key_filtering(true);
    options.set_write_buffer_size(WRITE_BUFFER_BYTES);
    options.set_max_write_buffer_number(WRITE_BUFFERS_MAX);
    options.set_level_compaction_dynamic_level_bytes(true);
    options.set_max_background_jobs(2);
    options.set_bytes_per_sync(1 << 20);
    options
}

/// State in RocksDB: one database, every keyspace behind its id prefix.
pub struct RocksStore {
    db: rocksdb::DB,
    path: PathBuf,
    registry: Mutex<()>,
}

impl fmt::Debug for RocksStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RocksStore").field("path", &self.path).finish()
    }
}

impl RocksStore {
    /// Opens (creating) the database at `path`, with the default cache cap.
    pub fn open(path: impl AsRef<Path>) -> Result<RocksStore> {
        Self::open_with_cache(path, STATE_CACHE_BYTES_DEFAULT)
    }

    /// Opens (creating) the database at `path`; its block cache holds at
    /// most `cache_bytes` (data, index and filter blocks).
    pub fn open_with_cache(path: impl AsRef<Path>, cache_bytes: usize) -> Result<RocksStore> {
        let path = path.as_ref().to_path_buf();
        let cache = rocksdb::Cache::new_lru_cache(cache_bytes);
        let options = rocks_options(&cache);
        // The default column family opened by name, so that it has a handle
        // (batched lookups take one), with the same options.
        let families = [(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, options.clone())];
        let db = rocksdb::DB::open_cf_with_opts(&options, &path, families).map_err(|e| Self::error(&path, e))?;
        Ok(RocksStore { db, path, registry: Mutex::new(()) })
    }

    fn error(path: &Path, error: rocksdb::Error) -> Error {
        Error::Store { path: path.to_path_buf(), message: error.into_string() }
    }
}

impl RocksStore {
    /// The names of the keyspaces the registry holds, in name order (for
    /// tools and tests that look at what a job keeps).
    pub fn keyspace_names(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        self.scan_prefix(Keyspace::REGISTRY, REGISTRY_NAME_PREFIX, &mut |key, _| {
            names.push(String::from_utf8_lossy(&key[REGISTRY_NAME_PREFIX.len()..]).into_owned());
            true
        })?;
        Ok(names)
    }
}

impl StateStore for RocksStore {
    fn keyspace(&self, name: &str) -> Result<Keyspace> {
        registry_keyspace(self, &self.registry, name)
    }

    fn get(&self, keyspace: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get(keyspace.prefixed(key)).map_err(|e| Self::error(&self.path, e))
    }

    fn scan_prefix(&self, keyspace: Keyspace, prefix: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        let start = keyspace.prefixed(prefix);
        let mut options = rocksdb::ReadOptions::default();
        if let Some(end) = prefix_end(&start) {
            options.set_iterate_upper_bound(end); // stop at the range's end, not at the next live key
        }
        let iter = self.db.iterator_opt(rocksdb::IteratorMode::From(&start, rocksdb::Direction::Forward), options);
        for entry in iter {
            let (key, value) = entry.map_err(|e| Self::error(&self.path, e))?;
            if !key.starts_with(&start) || !f(&key[4..], &value) {
                break;
            }
        }
        Ok(())
    }

    fn scan_keys_from(&self, keyspace: Keyspace, start: &[u8], limit: usize, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        let (_, end) = keyspace.range();
        let mut options = rocksdb::ReadOptions::default();
        options.set_iterate_upper_bound(end);
        let from = keyspace.prefixed(start);
        let iter = self.db.iterator_opt(rocksdb::IteratorMode::From(&from, rocksdb::Direction::Forward), options);
        for entry in iter.take(limit) {
            let (key, _) = entry.map_err(|e| Self::error(&self.path, e))?;
            f(&key[4..]);
        }
        Ok(())
    }

    fn multi_get(&self, keyspace: Keyspace, keys: &[&[u8]], f: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        debug_assert!(keys.windows(2).all(|pair| pair[0] < pair[1]), "a batched lookup's keys increase");
        let family = self.db.cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME).expect("the default family is open");
        for (chunk_at, chunk) in keys.chunks(MULTI_GET_KEYS_MAX).enumerate() {
            // One buffer of prefixed keys (their order is the keys' order).
            let mut buffer = Vec::with_capacity(chunk.iter().map(|key| 4 + key.len()).sum());
            let mut ends = Vec::with_capacity(chunk.len());
            for key in chunk {
                buffer.extend_from_slice(&keyspace.0.to_be_bytes());
                buffer.extend_from_slice(key);
                ends.push(buffer.len());
            }
            let starts = std::iter::once(0).chain(ends.iter().copied());
            let prefixed: Vec<&[u8]> = starts.zip(&ends).map(|(start, &end)| &buffer[start..end]).collect();
            let values = self.db.batched_multi_get_cf_opt(family, prefixed, true, &rocksdb::ReadOptions::default());
            assert_eq!(values.len(), chunk.len(), "a batched lookup answers each key");
            for (i, value) in values.into_iter().enumerate() {
                let value = value.map_err(|e| Self::error(&self.path, e))?;
                f(chunk_at * MULTI_GET_KEYS_MAX + i, value.as_deref());
            }
        }
        Ok(())
    }

    fn commit(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        let mut write = rocksdb::WriteBatch::default();
        // One buffer for every prefixed key: RocksDB copies it into the batch.
        let mut prefixed = Vec::new();
        for op in &batch.ops {
            match op {
                Op::Put(keyspace, key, value) => write.put(keyspace.prefixed_into(key, &mut prefixed), value),
                Op::Delete(keyspace, key) => write.delete(keyspace.prefixed_into(key, &mut prefixed)),
                Op::DeleteKeyspace(keyspace) => {
                    let (start, end) = keyspace.range();
                    write.delete_range(start, end);
                }
                Op::Epoch(keyspace, writes) => {
                    for (key, value) in writes.iter() {
                        match value {
                            Some(value) => write.put(keyspace.prefixed_into(key, &mut prefixed), value),
                            None => write.delete(keyspace.prefixed_into(key, &mut prefixed)),
                        }
                    }
                }
            }
        }
        let mut options = rocksdb::WriteOptions::default();
        options.set_sync(sync);
        self.db.write_opt(write, &options).map_err(|e| Self::error(&self.path, e))
    }
}

/// The first key after every key that starts with `prefix`, if any (none
/// when the prefix is all 0xff bytes).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// State in memory; the same behaviour as [`RocksStore`] minus durability.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
    registry: Mutex<()>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }
}

impl StateStore for MemoryStore {
    fn keyspace(&self, name: &str) -> Result<Keyspace> {
        registry_keyspace(self, &self.registry, name)
    }

    fn get(&self, keyspace: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.entries.read().expect("state lock").get(&keyspace.prefixed(key)).cloned())
    }

    fn scan_prefix(&self, keyspace: Keyspace, prefix: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        let start = keyspace.prefixed(prefix);
        // Copy the range out first, so `f` may call back into the store (as
        // it may with RocksDB) without deadlocking on this lock.
        let matching: Vec<(Vec<u8>, Vec<u8>)> = {
            let entries = self.entries.read().expect("state lock");
            entries
                .range(start.clone()..)
                .take_while(|(key, _)| key.starts_with(&start))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect()
        };
        for (key, value) in &matching {
            if !f(&key[4..], value) {
                break;
            }
        }
        Ok(())
    }

    fn scan_keys_from(&self, keyspace: Keyspace, start: &[u8], limit: usize, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        let (_, end) = keyspace.range();
        let keys: Vec<Vec<u8>> = {
            let entries = self.entries.read().expect("state lock");
            entries.range(keyspace.prefixed(start)..end).take(limit).map(|(key, _)| key.clone()).collect()
        };
        for key in &keys {
            f(&key[4..]);
        }
        Ok(())
    }

    fn commit(&self, batch: WriteBatch, _sync: bool) -> Result<()> {
        let mut entries = self.entries.write().expect("state lock");
        for op in batch.ops {
            match op {
                Op::Put(keyspace, key, value) => {
                    entries.insert(keyspace.prefixed(&key), value);
                }
                Op::Delete(keyspace, key) => {
                    entries.remove(&keyspace.prefixed(&key));
                }
                Op::DeleteKeyspace(keyspace) => {
                    let (start, end) = keyspace.range();
                    let mut from_start = entries.split_off(&start);
                    let mut after_end = from_start.split_off(&end);
                    entries.append(&mut after_end);
                }
                Op::Epoch(keyspace, writes) => {
                    for (key, value) in writes.iter() {
                        match value {
                            Some(value) => entries.insert(keyspace.prefixed(key), value.to_vec()),
                            None => entries.remove(&keyspace.prefixed(key)),
                        };
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options the database runs with are the documented ones
    /// (docs/state.md, "RocksDB options"): RocksDB writes what it applied to
    /// its OPTIONS file.
    #[test]
    fn rocksdb_runs_with_the_documented_options() {
        let dir = tempfile::tempdir().unwrap();
        let store = RocksStore::open_with_cache(dir.path(), 8 << 20).unwrap();
        let capacity = store.db.property_int_value("rocksdb.block-cache-capacity").unwrap();
        assert_eq!(capacity, Some(8 << 20));
        let options_file = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("OPTIONS-"))
            .max()
            .expect("RocksDB writes an OPTIONS file");
        let text = std::fs::read_to_string(options_file).unwrap();
        for setting in [
            "filter_policy=bloomfilter",
            "whole_key_filtering=true",
            "cache_index_and_filter_blocks=true",
            "pin_l0_filter_and_index_blocks_in_cache=true",
            "block_size=16384",
            "index_type=kTwoLevelIndexSearch",
            "partition_filters=true",
            "metadata_block_size=4096",
            "pin_top_level_index_and_filter=true",
            "memtable_prefix_bloom_size_ratio=0.100000",
            "memtable_whole_key_filtering=true",
            "write_buffer_size=67108864",
            "max_write_buffer_number=3",
            "level_compaction_dynamic_level_bytes=true",
            "compression_per_level=kNoCompression:kNoCompression:kLZ4Compression",
        ] {
            assert!(text.contains(setting), "{setting} is not in the OPTIONS file");
        }
    }
}
