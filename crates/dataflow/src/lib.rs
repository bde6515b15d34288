//! Millpond's dataflow runtime.
//!
//! Built so far: [`state`], where keyed operators keep their state (RocksDB,
//! or memory for tests and baselines). Sources, operators on timely and
//! differential dataflow, barrier checkpoints and views come next (issue 3).
//!
//! Invariant (architecture): this crate depends on `millpond-log` and on no
//! higher Millpond crate; it is the only crate that knows about RocksDB.

#![forbid(unsafe_code)]

pub mod state;
