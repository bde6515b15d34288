//! File I/O behind a small trait, so that crashes and I/O faults can be
//! tested deterministically (as redb and Materialize's persist do).
//!
//! - [`RealStorage`]: the filesystem (`pwrite`, `pread`, `fdatasync`, …).
//! - [`MemStorage`]: an in-memory double that models the page cache: every
//!   file has written bytes and synced bytes, every directory has its current
//!   entries and its synced entries. [`MemStorage::crash`] drops what was not
//!   synced: file contents not covered by an fsync, and directory entries
//!   (creates, renames, removals) not covered by an fsync of their directory.
//! - [`FaultStorage`]: a wrapper that injects faults chosen by the test: fail
//!   the Nth fsync, `ENOSPC` on writes or on creating files, a torn write.
//!
//! Invariants: the log does all its file I/O of a data directory through one
//! `Storage` (except [`crate::PartitionReader`] and [`crate::read_topic_id`],
//! which serve other processes and read the real filesystem). A trait object
//! call per system call is the only cost on the hot path; no bytes are
//! copied on the way.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How [`Storage::open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// An existing file, for reading and writing.
    Existing,
    /// A new file; an existing one is an error (`AlreadyExists`).
    CreateNew,
    /// Created if missing, emptied if present.
    Truncate,
    /// Created if missing; [`StorageFile::append`] writes at its end.
    Append,
}

/// An open file.
pub trait StorageFile: Send + Sync + fmt::Debug {
    /// Fills `buf` from `offset`; a short file is `UnexpectedEof`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset` (may be partial on error).
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at the end of the file.
    fn append(&self, buf: &[u8]) -> io::Result<()>;
    fn len(&self) -> io::Result<u64>;
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// `fdatasync`: the bytes written so far survive a crash.
    fn sync_data(&self) -> io::Result<()>;
    /// `fsync`.
    fn sync_all(&self) -> io::Result<()>;
    /// The operating system's file, where this is one (a server sends its
    /// bytes with `sendfile`); doubles have none.
    fn os_file(&self) -> Option<&File> {
        None
    }
}

/// Held while a data directory is locked; dropping it unlocks.
pub trait LockGuard: Send + Sync + fmt::Debug {}

/// A filesystem.
pub trait Storage: Send + Sync + fmt::Debug {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn StorageFile>>;
    /// A whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The names in a directory, sorted.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    fn exists(&self, path: &Path) -> bool;
    /// fsync of a directory: its entries (creates, renames, removals) survive a crash.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (created if missing) and writes
    /// `contents` into it; `WouldBlock` if another holder has it.
    fn lock(&self, path: &Path, contents: &[u8]) -> io::Result<Box<dyn LockGuard>>;
}

/// Creates (or empties) `path`, writes `bytes`, and with `sync` fsyncs it.
pub(crate) fn write_file(storage: &dyn Storage, path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
    let file = storage.open(path, OpenMode::Truncate)?;
    file.write_all_at(bytes, 0)?;
    if sync { file.sync_data() } else { Ok(()) }
}

// ---------------------------------------------------------------------------
// The real filesystem.

/// The filesystem, through `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealStorage;

impl StorageFile for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }
    fn append(&self, buf: &[u8]) -> io::Result<()> {
        (&*self).write_all(buf)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn sync_all(&self) -> io::Result<()> {
        File::sync_all(self)
    }
    fn os_file(&self) -> Option<&File> {
        Some(self)
    }
}

#[derive(Debug)]
struct FileLock(#[allow(dead_code)] File);

impl LockGuard for FileLock {}

impl Storage for RealStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn StorageFile>> {
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Existing => options.read(true).write(true),
            OpenMode::CreateNew => options.read(true).write(true).create_new(true),
            OpenMode::Truncate => options.read(true).write(true).create(true).truncate(true),
            OpenMode::Append => options.append(true).create(true),
        };
        Ok(Arc::new(options.open(path)?))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }
    fn lock(&self, path: &Path, contents: &[u8]) -> io::Result<Box<dyn LockGuard>> {
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(io::ErrorKind::WouldBlock.into()),
            Err(fs::TryLockError::Error(error)) => return Err(error),
        }
        file.set_len(0)?;
        file.write_all(contents)?;
        Ok(Box::new(FileLock(file)))
    }
}

// ---------------------------------------------------------------------------
// The in-memory double.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    File(u64),
    Dir(u64),
}

#[derive(Debug, Default, Clone)]
struct MemFileData {
    /// What readers see (the page cache).
    written: Vec<u8>,
    /// What survives a crash.
    synced: Vec<u8>,
}

#[derive(Debug, Default, Clone)]
struct MemDir {
    entries: BTreeMap<String, Node>,
    synced: BTreeMap<String, Node>,
}

#[derive(Debug, Default)]
struct MemState {
    files: BTreeMap<u64, MemFileData>,
    dirs: BTreeMap<u64, MemDir>,
    next_id: u64,
    locked: BTreeMap<PathBuf, u64>,
    /// Bumped by every crash: handles opened before it fail.
    epoch: u64,
    /// Changes left before the simulated machine stops (see
    /// [`MemStorage::crash_after`]); `Some(0)`: every change fails.
    changes_left: Option<u64>,
}

const ROOT: u64 = 0;

impl MemState {
    /// Counts one change (a write, sync, create, rename, removal); fails
    /// once the machine has stopped.
    fn change(&mut self) -> io::Result<()> {
        match self.changes_left {
            Some(0) => Err(io::Error::other("simulated crash: the machine has stopped")),
            Some(left) => {
                self.changes_left = Some(left - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn components(path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for component in path.components() {
            match component {
                Component::RootDir => {}
                Component::Normal(name) => out.push(name.to_string_lossy().into_owned()),
                _ => return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("unsupported path {path:?}"))),
            }
        }
        Ok(out)
    }

    fn lookup(&self, path: &Path) -> io::Result<Node> {
        let mut node = Node::Dir(ROOT);
        for name in Self::components(path)? {
            let Node::Dir(dir) = node else { return Err(io::ErrorKind::NotADirectory.into()) };
            node = *self.dirs[&dir].entries.get(&name).ok_or(io::ErrorKind::NotFound)?;
        }
        Ok(node)
    }

    /// The directory holding `path`, and `path`'s last name.
    fn parent(&self, path: &Path) -> io::Result<(u64, String)> {
        let mut names = Self::components(path)?;
        let name = names.pop().ok_or(io::ErrorKind::InvalidInput)?;
        let parent: PathBuf = std::iter::once("/".to_owned()).chain(names).collect();
        match self.lookup(&parent)? {
            Node::Dir(dir) => Ok((dir, name)),
            Node::File(_) => Err(io::ErrorKind::NotADirectory.into()),
        }
    }

    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn file_id(&self, path: &Path) -> io::Result<u64> {
        match self.lookup(path)? {
            Node::File(id) => Ok(id),
            Node::Dir(_) => Err(io::ErrorKind::IsADirectory.into()),
        }
    }

    fn create_dir(&mut self, path: &Path) -> io::Result<()> {
        let (parent, name) = self.parent(path)?;
        if self.dirs[&parent].entries.contains_key(&name) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        let id = self.new_id();
        self.dirs.insert(id, MemDir::default());
        self.dirs.get_mut(&parent).expect("parent").entries.insert(name, Node::Dir(id));
        Ok(())
    }

    /// After a crash: drops every file and directory that the synced
    /// entries no longer reach from the root.
    fn collect_garbage(&mut self) {
        let mut dirs = vec![ROOT];
        let mut files = Vec::new();
        let mut at = 0;
        while at < dirs.len() {
            for node in self.dirs[&dirs[at]].synced.values() {
                match *node {
                    Node::Dir(id) => dirs.push(id),
                    Node::File(id) => files.push(id),
                }
            }
            at += 1;
        }
        self.dirs.retain(|id, _| dirs.contains(id));
        self.files.retain(|id, _| files.contains(id));
    }
}

/// An in-memory filesystem that models what a crash keeps. Clones share
/// the same files.
#[derive(Debug, Clone, Default)]
pub struct MemStorage {
    state: Arc<Mutex<MemState>>,
}

#[derive(Debug)]
struct MemFile {
    state: Arc<Mutex<MemState>>,
    id: u64,
    epoch: u64,
}

#[derive(Debug)]
struct MemLock {
    state: Arc<Mutex<MemState>>,
    path: PathBuf,
    epoch: u64,
}

impl LockGuard for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut state = self.state.lock().expect("mem storage lock");
        if state.locked.get(&self.path) == Some(&self.epoch) {
            state.locked.remove(&self.path);
        }
    }
}

fn crashed() -> io::Error {
    io::Error::other("the handle was opened before a simulated crash")
}

impl MemFile {
    fn with<T>(&self, change: bool, f: impl FnOnce(&mut MemFileData) -> io::Result<T>) -> io::Result<T> {
        let mut state = self.state.lock().expect("mem storage lock");
        if state.epoch != self.epoch {
            return Err(crashed());
        }
        if change {
            state.change()?;
        }
        f(state.files.get_mut(&self.id).expect("open files are kept until a crash"))
    }
}

impl StorageFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.with(false, |file| {
            let start = offset as usize;
            let end = start.checked_add(buf.len()).ok_or(io::ErrorKind::InvalidInput)?;
            let bytes = file.written.get(start..end).ok_or(io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(bytes);
            Ok(())
        })
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.with(true, |file| {
            let start = offset as usize;
            let end = start + buf.len();
            if file.written.len() < end {
                file.written.resize(end, 0);
            }
            file.written[start..end].copy_from_slice(buf);
            Ok(())
        })
    }
    fn append(&self, buf: &[u8]) -> io::Result<()> {
        self.with(true, |file| {
            file.written.extend_from_slice(buf);
            Ok(())
        })
    }
    fn len(&self) -> io::Result<u64> {
        self.with(false, |file| Ok(file.written.len() as u64))
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(true, |file| {
            file.written.resize(len as usize, 0);
            Ok(())
        })
    }
    fn sync_data(&self) -> io::Result<()> {
        self.with(true, |file| {
            file.synced.clone_from(&file.written);
            Ok(())
        })
    }
    fn sync_all(&self) -> io::Result<()> {
        self.sync_data()
    }
}

impl MemStorage {
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MemState> {
        let mut state = self.state.lock().expect("mem storage lock");
        if state.dirs.is_empty() {
            state.dirs.insert(ROOT, MemDir::default());
        }
        state
    }

    /// Lets `changes` more changes (writes, syncs, creates, renames,
    /// removals, directory syncs) succeed; every later one fails, as if the
    /// machine stopped there. [`MemStorage::crash`] then gives the disk as
    /// it was at that moment.
    pub fn crash_after(&self, changes: u64) {
        self.state().changes_left = Some(changes);
    }

    /// Whether a [`MemStorage::crash_after`] limit was reached.
    pub fn stopped(&self) -> bool {
        self.state().changes_left == Some(0)
    }

    /// An independent copy of the whole filesystem (written and synced
    /// state), with no open handles or locks.
    pub fn deep_copy(&self) -> MemStorage {
        let state = self.state();
        let copy = MemState {
            files: state.files.clone(),
            dirs: state.dirs.clone(),
            next_id: state.next_id,
            locked: BTreeMap::new(),
            epoch: state.epoch + 1,
            changes_left: None,
        };
        MemStorage { state: Arc::new(Mutex::new(copy)) }
    }

    /// Simulates a power loss: every file keeps only its synced bytes, every
    /// directory only its synced entries (unsynced creates, renames and
    /// removals are undone); unreachable files vanish; open handles and
    /// locks die.
    pub fn crash(&self) {
        let mut state = self.state();
        for dir in state.dirs.values_mut() {
            dir.entries = dir.synced.clone();
        }
        for file in state.files.values_mut() {
            file.written = file.synced.clone();
        }
        state.collect_garbage();
        state.locked.clear();
        state.epoch += 1;
        state.changes_left = None;
    }

    /// The bytes of `path` as readers see them now (for tests).
    pub fn contents(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.read(path)
    }
}

impl Storage for MemStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn StorageFile>> {
        let mut state = self.state();
        let id = match (state.lookup(path), mode) {
            (Ok(Node::Dir(_)), _) => return Err(io::ErrorKind::IsADirectory.into()),
            (Ok(Node::File(_)), OpenMode::CreateNew) => return Err(io::ErrorKind::AlreadyExists.into()),
            (Ok(Node::File(id)), OpenMode::Truncate) => {
                state.change()?;
                state.files.get_mut(&id).expect("file").written.clear();
                id
            }
            (Ok(Node::File(id)), _) => id,
            (Err(e), OpenMode::Existing) => return Err(e),
            (Err(e), _) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            (Err(_), _) => {
                let (parent, name) = state.parent(path)?;
                state.change()?;
                let id = state.new_id();
                state.files.insert(id, MemFileData::default());
                state.dirs.get_mut(&parent).expect("parent").entries.insert(name, Node::File(id));
                id
            }
        };
        let epoch = state.epoch;
        Ok(Arc::new(MemFile { state: self.state.clone(), id, epoch }))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let state = self.state();
        let id = state.file_id(path)?;
        Ok(state.files[&id].written.clone())
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.change()?;
        state.create_dir(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        let mut at = PathBuf::from("/");
        for name in MemState::components(path)? {
            at.push(name);
            match state.lookup(&at) {
                Ok(Node::Dir(_)) => {}
                Ok(Node::File(_)) => return Err(io::ErrorKind::AlreadyExists.into()),
                Err(_) => {
                    state.change()?;
                    state.create_dir(&at)?;
                }
            }
        }
        Ok(())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state();
        let node = state.lookup(from)?;
        let (from_dir, from_name) = state.parent(from)?;
        let (to_dir, to_name) = state.parent(to)?;
        if let (Node::Dir(_), Ok(Node::Dir(existing))) = (node, state.lookup(to))
            && !state.dirs[&existing].entries.is_empty()
        {
            return Err(io::ErrorKind::DirectoryNotEmpty.into());
        }
        state.change()?;
        state.dirs.get_mut(&from_dir).expect("dir").entries.remove(&from_name);
        state.dirs.get_mut(&to_dir).expect("dir").entries.insert(to_name, node);
        Ok(())
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.file_id(path)?;
        let (dir, name) = state.parent(path)?;
        state.change()?;
        state.dirs.get_mut(&dir).expect("dir").entries.remove(&name);
        Ok(())
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        match state.lookup(path)? {
            Node::Dir(_) => {}
            Node::File(_) => return Err(io::ErrorKind::NotADirectory.into()),
        }
        let (dir, name) = state.parent(path)?;
        state.change()?;
        // Unlinking the subtree: like rm -r, each removal is an unsynced
        // change of its directory; a crash may bring back the whole subtree
        // only if the parent's entry was synced, which is what it models.
        state.dirs.get_mut(&dir).expect("dir").entries.remove(&name);
        Ok(())
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let state = self.state();
        match state.lookup(path)? {
            Node::Dir(id) => Ok(state.dirs[&id].entries.keys().cloned().collect()),
            Node::File(_) => Err(io::ErrorKind::NotADirectory.into()),
        }
    }
    fn exists(&self, path: &Path) -> bool {
        self.state().lookup(path).is_ok()
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        match state.lookup(path)? {
            Node::Dir(id) => {
                state.change()?;
                let dir = state.dirs.get_mut(&id).expect("dir");
                dir.synced = dir.entries.clone();
                Ok(())
            }
            Node::File(_) => Err(io::ErrorKind::NotADirectory.into()),
        }
    }
    fn lock(&self, path: &Path, contents: &[u8]) -> io::Result<Box<dyn LockGuard>> {
        let epoch = {
            let mut state = self.state();
            if state.locked.contains_key(path) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let epoch = state.epoch;
            state.locked.insert(path.to_path_buf(), epoch);
            epoch
        };
        let guard = MemLock { state: self.state.clone(), path: path.to_path_buf(), epoch };
        write_file(self, path, contents, false)?;
        Ok(Box::new(guard))
    }
}

// ---------------------------------------------------------------------------
// Fault injection.

/// Which faults a [`FaultStorage`] injects. Counters count calls through
/// this wrapper from its creation (or the last [`FaultStorage::set_plan`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Fail the Nth `sync_data`/`sync_all` of a file (1-based) with EIO, and
    /// every later one of that file (the kernel reports a lost write once,
    /// then the page is clean: the log must never retry).
    pub fail_fsync: Option<u64>,
    /// Fail every write (`write_all_at`, `append`) from the Nth on with
    /// ENOSPC, after writing nothing.
    pub enospc_on_write: Option<u64>,
    /// Fail every file creation (`CreateNew`, `Truncate`, `Append` of a new
    /// file) from the Nth on with ENOSPC.
    pub enospc_on_create: Option<u64>,
    /// Tear the Nth write: write only its first `bytes` bytes, then fail with EIO.
    pub torn_write: Option<(u64, usize)>,
}

impl FaultPlan {
    /// A plan drawn from `seed`: one fault of one kind at a call number in
    /// `1..=max_call`.
    pub fn from_seed(seed: u64, max_call: u64) -> FaultPlan {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let call = next() % max_call.max(1) + 1;
        match next() % 4 {
            0 => FaultPlan { fail_fsync: Some(call), ..FaultPlan::default() },
            1 => FaultPlan { enospc_on_write: Some(call), ..FaultPlan::default() },
            2 => FaultPlan { enospc_on_create: Some(call), ..FaultPlan::default() },
            _ => FaultPlan { torn_write: Some((call, (next() % 64) as usize)), ..FaultPlan::default() },
        }
    }
}

#[derive(Debug, Default)]
struct FaultCounters {
    fsyncs: AtomicU64,
    writes: AtomicU64,
    creates: AtomicU64,
}

#[derive(Debug)]
struct FaultShared {
    plan: Mutex<FaultPlan>,
    counters: FaultCounters,
    /// Faults injected so far.
    injected: AtomicU64,
}

/// A [`Storage`] wrapper that injects the faults of a [`FaultPlan`].
#[derive(Debug, Clone)]
pub struct FaultStorage {
    inner: Arc<dyn Storage>,
    shared: Arc<FaultShared>,
}

#[derive(Debug)]
struct FaultFile {
    inner: Arc<dyn StorageFile>,
    shared: Arc<FaultShared>,
    /// Set once an fsync of this file failed: later ones fail too.
    fsync_failed: std::sync::atomic::AtomicBool,
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(28)
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(5)
}

impl FaultStorage {
    pub fn new(inner: Arc<dyn Storage>, plan: FaultPlan) -> FaultStorage {
        let shared =
            FaultShared { plan: Mutex::new(plan), counters: FaultCounters::default(), injected: AtomicU64::new(0) };
        FaultStorage { inner, shared: Arc::new(shared) }
    }

    /// Replaces the plan and restarts the counters (say, "the disk has
    /// space again": `FaultPlan::default()`).
    pub fn set_plan(&self, plan: FaultPlan) {
        *self.shared.plan.lock().expect("plan lock") = plan;
        self.shared.counters.fsyncs.store(0, Ordering::SeqCst);
        self.shared.counters.writes.store(0, Ordering::SeqCst);
        self.shared.counters.creates.store(0, Ordering::SeqCst);
    }

    /// How many faults were injected.
    pub fn injected(&self) -> u64 {
        self.shared.injected.load(Ordering::SeqCst)
    }
}

impl FaultShared {
    fn plan(&self) -> FaultPlan {
        self.plan.lock().expect("plan lock").clone()
    }
    fn inject(&self) {
        self.injected.fetch_add(1, Ordering::SeqCst);
    }
    /// Counts a write; `Some(bytes)` if it must be torn after `bytes`, `Err` for ENOSPC.
    fn on_write(&self) -> io::Result<Option<usize>> {
        let n = self.counters.writes.fetch_add(1, Ordering::SeqCst) + 1;
        let plan = self.plan();
        if plan.enospc_on_write.is_some_and(|at| n >= at) {
            self.inject();
            return Err(enospc());
        }
        match plan.torn_write {
            Some((at, bytes)) if at == n => {
                self.inject();
                Ok(Some(bytes))
            }
            _ => Ok(None),
        }
    }
}

impl FaultFile {
    fn sync(&self, f: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        if self.fsync_failed.load(Ordering::SeqCst) {
            return Err(eio());
        }
        let n = self.shared.counters.fsyncs.fetch_add(1, Ordering::SeqCst) + 1;
        if self.shared.plan().fail_fsync == Some(n) {
            self.shared.inject();
            self.fsync_failed.store(true, Ordering::SeqCst);
            return Err(eio());
        }
        f()
    }
}

impl StorageFile for FaultFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        match self.shared.on_write()? {
            None => self.inner.write_all_at(buf, offset),
            Some(bytes) => {
                self.inner.write_all_at(&buf[..bytes.min(buf.len())], offset)?;
                Err(eio())
            }
        }
    }
    fn append(&self, buf: &[u8]) -> io::Result<()> {
        match self.shared.on_write()? {
            None => self.inner.append(buf),
            Some(bytes) => {
                self.inner.append(&buf[..bytes.min(buf.len())])?;
                Err(eio())
            }
        }
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.sync(|| self.inner.sync_data())
    }
    fn sync_all(&self) -> io::Result<()> {
        self.sync(|| self.inner.sync_all())
    }
}

impl Storage for FaultStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn StorageFile>> {
        let creates = match mode {
            OpenMode::Existing => false,
            OpenMode::CreateNew => true,
            OpenMode::Truncate | OpenMode::Append => !self.inner.exists(path),
        };
        if creates {
            let n = self.shared.counters.creates.fetch_add(1, Ordering::SeqCst) + 1;
            if self.shared.plan().enospc_on_create.is_some_and(|at| n >= at) {
                self.shared.inject();
                return Err(enospc());
            }
        }
        let inner = self.inner.open(path, mode)?;
        Ok(Arc::new(FaultFile { inner, shared: self.shared.clone(), fsync_failed: Default::default() }))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path)
    }
    fn lock(&self, path: &Path, contents: &[u8]) -> io::Result<Box<dyn LockGuard>> {
        self.inner.lock(path, contents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_keeps_only_synced_bytes_and_entries() {
        let mem = MemStorage::new();
        let dir = Path::new("/d");
        mem.create_dir_all(dir).unwrap();
        mem.sync_dir(Path::new("/")).unwrap();
        let a = mem.open(&dir.join("a"), OpenMode::CreateNew).unwrap();
        a.write_all_at(b"hello", 0).unwrap();
        a.sync_data().unwrap();
        a.write_all_at(b" world", 5).unwrap();
        mem.sync_dir(dir).unwrap();
        let b = mem.open(&dir.join("b"), OpenMode::CreateNew).unwrap();
        b.write_all_at(b"unsynced entry", 0).unwrap();
        b.sync_data().unwrap();
        mem.rename(&dir.join("a"), &dir.join("c")).unwrap();
        assert_eq!(mem.list_dir(dir).unwrap(), ["b", "c"]);
        assert_eq!(mem.read(&dir.join("c")).unwrap(), b"hello world");
        mem.crash();
        assert_eq!(mem.list_dir(dir).unwrap(), ["a"], "unsynced create and rename undone");
        assert_eq!(mem.read(&dir.join("a")).unwrap(), b"hello", "unsynced bytes dropped");
        assert!(a.len().is_err(), "handles die with the crash");
        // A directory created but whose parent was never synced vanishes.
        mem.create_dir_all(Path::new("/d/e/f")).unwrap();
        mem.sync_dir(Path::new("/d/e")).unwrap();
        mem.crash();
        assert!(!mem.exists(Path::new("/d/e")));
    }

    #[test]
    fn locks_exclude_until_dropped_or_crashed() {
        let mem = MemStorage::new();
        let lock = mem.lock(Path::new("/lock"), b"1").unwrap();
        assert_eq!(mem.lock(Path::new("/lock"), b"2").unwrap_err().kind(), io::ErrorKind::WouldBlock);
        drop(lock);
        let _lock = mem.lock(Path::new("/lock"), b"3").unwrap();
        mem.crash();
        mem.lock(Path::new("/lock"), b"4").unwrap();
    }

    #[test]
    fn faults_fire_at_their_call() {
        let mem: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let plan = FaultPlan { fail_fsync: Some(2), torn_write: Some((2, 3)), ..FaultPlan::default() };
        let faults = FaultStorage::new(mem.clone(), plan);
        let file = faults.open(Path::new("/f"), OpenMode::CreateNew).unwrap();
        file.write_all_at(b"abc", 0).unwrap();
        assert_eq!(file.write_all_at(b"defgh", 3).unwrap_err().raw_os_error(), Some(5));
        assert_eq!(mem.read(Path::new("/f")).unwrap(), b"abcdef", "torn after 3 bytes");
        file.sync_data().unwrap();
        assert!(file.sync_data().is_err());
        assert!(file.sync_data().is_err(), "a failed fsync stays failed");
        faults.set_plan(FaultPlan { enospc_on_create: Some(1), enospc_on_write: Some(1), ..FaultPlan::default() });
        assert_eq!(faults.open(Path::new("/g"), OpenMode::CreateNew).unwrap_err().raw_os_error(), Some(28));
        assert_eq!(file.append(b"x").unwrap_err().raw_os_error(), Some(28));
        assert_eq!(faults.injected(), 4);
        for seed in 0..50 {
            let plan = FaultPlan::from_seed(seed, 10);
            assert_ne!(plan, FaultPlan::default());
        }
    }
}
