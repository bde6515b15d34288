//! Both state backends against a `BTreeMap` model: random keyspaces, batches
//! of puts, deletes and whole-keyspace deletes, gets, prefix scans and (for
//! RocksDB) reopens.

use std::collections::BTreeMap;

use millpond_dataflow::state::{Keyspace, MemoryStore, RocksStore, StateStore, WriteBatch};
use proptest::prelude::*;

/// One operation of a batch, on the keyspace with that index.
#[derive(Clone, Debug)]
enum Write {
    Put(u8, Vec<u8>, Vec<u8>),
    Delete(u8, Vec<u8>),
    DeleteKeyspace(u8),
}

type BatchOps = Vec<Write>;

#[derive(Clone, Debug)]
enum Op {
    Batch(BatchOps),
    Get(u8, Vec<u8>),
    Scan(u8, Vec<u8>),
    Reopen,
}

/// Small alphabets make collisions and shared prefixes likely; 0xff bytes
/// test the scan's upper bound.
fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop_oneof![0u8..4, Just(0xfe), Just(0xff)], 0..4)
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        6 => (0u8..3, key(), proptest::collection::vec(any::<u8>(), 0..6)).prop_map(|(k, key, v)| Write::Put(k, key, v)),
        3 => (0u8..3, key()).prop_map(|(k, key)| Write::Delete(k, key)),
        1 => (0u8..3).prop_map(Write::DeleteKeyspace),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::collection::vec(write(), 1..8).prop_map(Op::Batch),
        3 => (0u8..3, key()).prop_map(|(k, key)| Op::Get(k, key)),
        2 => (0u8..3, proptest::collection::vec(prop_oneof![0u8..4, Just(0xff)], 0..3)).prop_map(|(k, p)| Op::Scan(k, p)),
        1 => Just(Op::Reopen),
    ]
}

/// Model: (keyspace name index, key) -> value.
type Model = BTreeMap<(u8, Vec<u8>), Vec<u8>>;

fn check(store: &dyn StateStore, spaces: &[Keyspace; 3], model: &Model, op: &Op) -> Result<(), TestCaseError> {
    match op {
        Op::Get(k, key) => {
            let got = store.get(spaces[*k as usize], key).unwrap();
            prop_assert_eq!(got.as_ref(), model.get(&(*k, key.clone())));
        }
        Op::Scan(k, prefix) => {
            let mut got = Vec::new();
            store
                .scan_prefix(spaces[*k as usize], prefix, &mut |key, value| {
                    got.push((key.to_vec(), value.to_vec()));
                    true
                })
                .unwrap();
            let expected: Vec<_> = model
                .iter()
                .filter(|((space, key), _)| space == k && key.starts_with(prefix))
                .map(|((_, key), value)| (key.clone(), value.clone()))
                .collect();
            prop_assert_eq!(got, expected);
        }
        _ => {}
    }
    Ok(())
}

fn apply(store: &dyn StateStore, spaces: &[Keyspace; 3], model: &mut Model, ops: &BatchOps) {
    let mut batch = WriteBatch::new();
    for write in ops {
        match write {
            Write::Put(k, key, value) => {
                batch.put(spaces[*k as usize], key, value);
                model.insert((*k, key.clone()), value.clone());
            }
            Write::Delete(k, key) => {
                batch.delete(spaces[*k as usize], key);
                model.remove(&(*k, key.clone()));
            }
            Write::DeleteKeyspace(k) => {
                batch.delete_keyspace(spaces[*k as usize]);
                model.retain(|(space, _), _| space != k);
            }
        }
    }
    store.commit(batch, true).unwrap();
}

fn open_spaces(store: &dyn StateStore) -> [Keyspace; 3] {
    ["sum", "count", "join/left"].map(|name| store.keyspace(name).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn rocks_and_memory_match_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut rocks = RocksStore::open(dir.path()).unwrap();
        let memory = MemoryStore::new();
        let mut rocks_spaces = open_spaces(&rocks);
        let memory_spaces = open_spaces(&memory);
        let (mut rocks_model, mut memory_model) = (Model::new(), Model::new());
        for op in &ops {
            match op {
                Op::Batch(batch) => {
                    apply(&rocks, &rocks_spaces, &mut rocks_model, batch);
                    apply(&memory, &memory_spaces, &mut memory_model, batch);
                }
                Op::Reopen => {
                    drop(rocks);
                    rocks = RocksStore::open(dir.path()).unwrap();
                    let reopened = open_spaces(&rocks);
                    prop_assert_eq!(reopened, rocks_spaces, "keyspace ids survive a restart");
                    rocks_spaces = reopened;
                }
                other => {
                    check(&rocks, &rocks_spaces, &rocks_model, other)?;
                    check(&memory, &memory_spaces, &memory_model, other)?;
                }
            }
        }
        prop_assert_eq!(rocks_model, memory_model);
    }
}

#[test]
fn keyspaces_are_isolated_and_names_are_checked() {
    let store = MemoryStore::new();
    let (a, b) = (store.keyspace("a").unwrap(), store.keyspace("b").unwrap());
    assert_ne!(a, b);
    assert_eq!(store.keyspace("a").unwrap(), a);
    let mut batch = WriteBatch::new();
    batch.put(a, b"k", b"1");
    store.commit(batch, true).unwrap();
    assert_eq!(store.get(b, b"k").unwrap(), None);
    assert!(store.keyspace("").is_err());
    assert!(store.keyspace(&"x".repeat(256)).is_err());
}

fn count_keys(store: &dyn StateStore, space: Keyspace) -> u32 {
    let mut count = 0;
    store
        .scan_prefix(space, b"", &mut |_, _| {
            count += 1;
            true
        })
        .unwrap();
    count
}

#[test]
fn a_batch_is_all_or_nothing_across_a_crash() {
    // The child commits batches of 100 new keys (continuing after what is
    // there) and prints each round once `commit` returns; the parent kills it
    // with SIGKILL and checks that only whole batches exist and that every
    // acknowledged one does.
    if let Ok(dir) = std::env::var("MILLPOND_STATE_CHILD_DIR") {
        use std::io::Write;
        let store = RocksStore::open(&dir).unwrap();
        let space = store.keyspace("counts").unwrap();
        let existing = count_keys(&store, space);
        let mut stdout = std::io::stdout();
        for round in existing / 100.. {
            let mut batch = WriteBatch::new();
            for i in 0..100u32 {
                batch.put(space, &(round * 100 + i).to_be_bytes(), b"x");
            }
            store.commit(batch, round % 2 == 0).unwrap();
            writeln!(stdout, "committed {round}").unwrap();
            stdout.flush().unwrap();
        }
        return;
    }
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut acknowledged = 0u32;
    for attempt in 0..3u64 {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "a_batch_is_all_or_nothing_across_a_crash", "--nocapture", "--test-threads", "1"])
            .env("MILLPOND_STATE_CHILD_DIR", dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the first acknowledged commit (however slow the machine),
        // then let it run a little and kill it.
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.find_map(|l| l.ok()?.strip_prefix("committed ")?.parse::<u32>().ok());
        let first = first.unwrap_or_else(|| panic!("attempt {attempt}: the child committed nothing"));
        acknowledged = acknowledged.max(first + 1);
        std::thread::sleep(std::time::Duration::from_millis(50 + attempt * 40));
        child.kill().unwrap();
        child.wait().unwrap();
        for line in lines.map_while(Result::ok) {
            if let Some(round) = line.strip_prefix("committed ").and_then(|r| r.parse::<u32>().ok()) {
                acknowledged = acknowledged.max(round + 1);
            }
        }
        let store = RocksStore::open(dir.path()).unwrap();
        let space = store.keyspace("counts").unwrap();
        let count = count_keys(&store, space);
        assert_eq!(count % 100, 0, "attempt {attempt}: {count} keys is not whole batches");
        assert!(count >= acknowledged * 100, "attempt {attempt}: {count} keys, but {acknowledged} rounds acknowledged");
        eprintln!("state crash test: attempt {attempt}: {count} keys, {acknowledged} rounds acknowledged");
    }
}
