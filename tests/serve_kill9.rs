//! A durable subscription under a `millpond serve` that is killed with
//! SIGKILL, again and again, and a client (the real psql) that crashes
//! between FETCH and ACK: the client's state, built only from what it
//! acknowledged, ends equal to the view (nothing missed, nothing twice).
//!
//! The client follows the protocol docs/server.md describes: it applies
//! the changes of the epochs a progress row closed, ACKs the last such
//! epoch, and keeps the result only once the ACK is answered; an ACK whose
//! answer was lost (the server died) is resolved by reading the
//! subscription's position after the restart.
//!
//! `MILLPOND_SERVE_KILL9_SEED=N` replays one seed.
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::server::{Rng, Server, psql};

/// The row multiset a client keeps: "k|v" to its count.
type State = BTreeMap<String, i64>;

fn apply(state: &mut State, row: &str, diff: i64) {
    let count = state.entry(row.to_owned()).or_default();
    *count += diff;
    assert!(*count >= 0, "a retraction of a row the client does not hold: {row}");
    if *count == 0 {
        state.remove(row);
    }
}

/// The changes of the epochs a read's progress rows closed, and the last such epoch.
type Closed = (Vec<(String, i64)>, u64);

/// One read (None: no epoch closed).
fn read(port: u16) -> Result<Option<Closed>, String> {
    let sql = "DECLARE c CURSOR FOR SUBSCRIBE TO SUBSCRIPTION s WITH (PROGRESS); FETCH 500 c WITH (timeout = '300ms')";
    let rows = psql(port, sql)?;
    let (mut closed, mut open, mut through) = (Vec::new(), Vec::new(), None);
    for row in rows {
        let epoch: u64 = row[0].parse().unwrap();
        if row[1] == "t" {
            closed.append(&mut open);
            through = Some(epoch);
        } else {
            open.push((format!("{}|{}", row[3], row[4]), row[2].parse::<i64>().unwrap()));
        }
    }
    Ok(through.map(|through| (closed, through)))
}

fn acked(port: u16) -> Option<u64> {
    let rows = psql(port, "SHOW SUBSCRIPTIONS").ok()?;
    rows.first().and_then(|r| r[2].parse().ok())
}

fn run_seed(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), false);
    let setup = "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT); \
                 CREATE MATERIALIZED VIEW v AS SELECT k, v FROM t; CREATE SUBSCRIPTION s FOR v";
    psql(server.port, setup).unwrap();
    let mut committed = State::new();
    let mut committed_through: Option<u64> = None;
    let (mut kills, mut crashes) = (0, 0);
    for round in 0..12 {
        // Writes (a killed server may cut them: the view is the truth).
        let k = rng.below(8);
        let write = match rng.below(3) {
            0 => format!("INSERT INTO t VALUES ({k}, {round}) "),
            1 => format!("UPDATE t SET v = {round} WHERE k = {k}"),
            _ => format!("DELETE FROM t WHERE k = {k}"),
        };
        let _ = psql(server.port, &format!("INSERT INTO t VALUES ({}, {round}); {write}", 100 + round));
        // A read; maybe a client crash before its ACK.
        if let Ok(Some((changes, through))) = read(server.port) {
            let mut working = committed.clone();
            for (row, diff) in &changes {
                apply(&mut working, row, *diff);
            }
            if rng.below(3) == 0 {
                crashes += 1; // crashed between FETCH and ACK: the working state is lost
            } else {
                match psql(server.port, &format!("ACK SUBSCRIPTION s THROUGH {through}")) {
                    Ok(_) => (committed, committed_through) = (working, Some(through)),
                    Err(_) => {
                        // The answer was lost: the position says whether it landed.
                        let dir = server.kill();
                        server = Server::start(&dir, false);
                        kills += 1;
                        if acked(server.port) == Some(through) {
                            (committed, committed_through) = (working, Some(through));
                        }
                    }
                }
            }
        }
        if rng.below(3) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(80)));
            let dir = server.kill();
            server = Server::start(&dir, false);
            kills += 1;
        }
        assert_eq!(acked(server.port), committed_through, "seed {seed} round {round}: the position is the client's");
    }
    // The table is the truth; once the view shows it, drain the
    // subscription to the committed epoch and compare.
    let rows_of = |sql: &str| -> State {
        let mut state = State::new();
        for row in psql(server.port, sql).unwrap() {
            apply(&mut state, &row.join("|"), 1);
        }
        state
    };
    let truth = rows_of("SELECT k, v FROM t");
    let deadline = Instant::now() + Duration::from_secs(120);
    while rows_of("SELECT k, v FROM v") != truth {
        assert!(Instant::now() < deadline, "seed {seed}: the view never caught up with the table");
        std::thread::sleep(Duration::from_millis(20));
    }
    let epoch = millpond_dataflow::CheckpointMeta::read_published(dir.path()).unwrap().unwrap().epoch;
    while committed_through.is_none_or(|through| through < epoch) {
        assert!(Instant::now() < deadline, "seed {seed}: the subscription never caught up");
        if let Some((changes, through)) = read(server.port).unwrap() {
            for (row, diff) in &changes {
                apply(&mut committed, row, *diff);
            }
            psql(server.port, &format!("ACK SUBSCRIPTION s THROUGH {through}")).unwrap();
            committed_through = Some(through);
        }
    }
    assert_eq!(committed, truth, "seed {seed}: {kills} kills, {crashes} client crashes");
    assert!(
        kills > 0 && crashes > 0 && !truth.is_empty(),
        "seed {seed} tested little: {kills} kills, {crashes} crashes"
    );
    eprintln!("seed {seed}: {kills} server kills, {crashes} client crashes, {} rows", truth.len());
    let dir = server.kill();
    drop(dir);
}

#[test]
fn a_durable_subscription_survives_server_kills_and_client_crashes() {
    match std::env::var("MILLPOND_SERVE_KILL9_SEED") {
        Ok(seed) => run_seed(seed.parse().expect("a seed number")),
        Err(_) => {
            for seed in [1, 2, 3] {
                run_seed(seed);
            }
        }
    }
}
