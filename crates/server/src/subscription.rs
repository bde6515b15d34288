//! Durable subscriptions: a named position in a view's changelog, kept by
//! the server across disconnects, client crashes and its own restarts.
//!
//! `CREATE SUBSCRIPTION s FOR view [WITH (max_retained_epochs = N)]` starts
//! at the view's last committed epoch, with its snapshot. A client reads
//! it with `SUBSCRIBE TO SUBSCRIPTION s` (as COPY, or a cursor) and, having
//! processed every change through epoch `e` (a progress row says when),
//! acknowledges it: `ACK SUBSCRIPTION s THROUGH e`. The next read starts
//! right after the last acknowledged epoch, without a snapshot.
//!
//! Stored in the compacted topic `__millpond_subscriptions`, one record per
//! subscription (key: its name; value: `{"version":1,"name","view","start",
//! "acked","max_retained_epochs"}`; a tombstone when dropped).
//!
//! Invariants:
//! - An acknowledgement is on disk (the append is synced) before it is
//!   answered; acknowledgements only move forward (an older one changes
//!   nothing, so a retry is harmless); one past the view's committed epoch
//!   is refused.
//! - While the view's committed epoch is at most `max_retained_epochs`
//!   past a subscription's position, compaction keeps every change after
//!   the position (a [`ChangelogHold`]); past that the hold lapses and the
//!   subscription is `lagging` (it reads on while the changes are there),
//!   then `lost` once compaction took them (a read fails with 22000: drop
//!   and create it again to start from a snapshot).
//! - A record that does not read fails the server's start naming its offset.

use std::collections::BTreeMap;
use std::sync::Mutex;

use millpond_dataflow::{ChangelogHold, ChangelogHolds, CheckpointMeta, Epoch, TopicRecord, TopicSpec, Topics};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The topic that keeps the subscriptions.
pub const SUBSCRIPTIONS_TOPIC: &str = "__millpond_subscriptions";
const SUBSCRIPTIONS_SPEC: TopicSpec = TopicSpec { partitions: 1, compacted: true, compaction_bounded: false };
const RECORD_VERSION: u32 = 1;
/// Epochs a subscription may fall behind before its hold lapses, unless told.
pub const MAX_RETAINED_EPOCHS_DEFAULT: u64 = 100_000;
/// Subscriptions a server keeps at once.
pub const SUBSCRIPTIONS_MAX: usize = 10_000;

/// One subscription, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Durable {
    pub version: u32,
    pub name: String,
    pub view: String,
    /// The epoch of its snapshot.
    pub start: Epoch,
    /// Every change through this epoch is processed (None: not even the snapshot).
    pub acked: Option<Epoch>,
    pub max_retained_epochs: u64,
}

impl Durable {
    /// Where a read starts: (AS OF, with the snapshot?).
    pub fn position(&self) -> (Epoch, bool) {
        match self.acked {
            Some(acked) => (acked, false),
            None => (self.start, true),
        }
    }
}

/// What `SHOW SUBSCRIPTIONS` says of one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionStatus {
    pub durable: Durable,
    /// The view's last committed epoch (0 if it has none).
    pub committed: Epoch,
    pub lag_epochs: u64,
    /// `active`, `lagging` (its hold lapsed) or `lost` (its changes are gone).
    pub state: &'static str,
}

/// The server's subscriptions.
#[derive(Debug)]
pub(crate) struct Subscriptions {
    topics: Topics,
    all: Mutex<BTreeMap<String, Durable>>,
    /// Shared with every run of the runtime.
    pub(crate) holds: ChangelogHolds,
}

impl Subscriptions {
    /// Loads the stored subscriptions (the latest record per name).
    pub(crate) fn load(topics: &Topics) -> Result<Subscriptions> {
        topics.ensure(SUBSCRIPTIONS_TOPIC, SUBSCRIPTIONS_SPEC)?;
        let mut all = BTreeMap::new();
        for record in topics.read_all(SUBSCRIPTIONS_TOPIC)? {
            let corrupt =
                |message: String| Error::Corrupt { what: SUBSCRIPTIONS_TOPIC, offset: record.offset, message };
            let key = record.key.clone().ok_or_else(|| corrupt("a record without a key".into()))?;
            let name = String::from_utf8(key).map_err(|_| corrupt("a key that is not UTF-8".into()))?;
            match &record.value {
                None => {
                    all.remove(&name);
                }
                Some(value) => {
                    let durable: Durable = serde_json::from_slice(value).map_err(|e| corrupt(e.to_string()))?;
                    if durable.version != RECORD_VERSION || durable.name != name {
                        return Err(corrupt(format!(
                            "version {} of \"{}\" under key \"{name}\"",
                            durable.version, durable.name
                        )));
                    }
                    all.insert(name, durable);
                }
            }
        }
        let subscriptions =
            Subscriptions { topics: topics.clone(), all: Mutex::new(all), holds: ChangelogHolds::default() };
        subscriptions.refresh_holds();
        Ok(subscriptions)
    }

    fn all(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Durable>> {
        self.all.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every subscription's position becomes a hold on its view's changelog.
    fn refresh_holds(&self) {
        let holds: BTreeMap<String, ChangelogHold> = self
            .all()
            .values()
            .map(|d| {
                let hold =
                    ChangelogHold { view: d.view.clone(), epoch: d.position().0, epochs_max: d.max_retained_epochs };
                (d.name.clone(), hold)
            })
            .collect();
        *self.holds.lock().unwrap_or_else(|e| e.into_inner()) = holds;
    }

    /// Writes `durable` (or the tombstone of `name`), synced, then holds it.
    fn store(&self, all: &mut BTreeMap<String, Durable>, name: &str, durable: Option<Durable>) -> Result<()> {
        let value = durable.as_ref().map(|d| serde_json::to_vec(d).expect("a subscription serializes"));
        let record = TopicRecord { key: Some(name.as_bytes().to_vec()), value, headers: vec![] };
        self.topics.append(SUBSCRIPTIONS_TOPIC, vec![record])?;
        match durable {
            Some(durable) => all.insert(name.to_owned(), durable),
            None => all.remove(name),
        };
        Ok(())
    }

    pub(crate) fn get(&self, name: &str) -> Option<Durable> {
        self.all().get(name).cloned()
    }

    /// Creates `name` on `view` at epoch `start`; false if it exists.
    pub(crate) fn create(&self, name: &str, view: &str, start: Epoch, max_retained_epochs: u64) -> Result<bool> {
        let mut all = self.all();
        if all.contains_key(name) {
            return Ok(false);
        }
        if all.len() >= SUBSCRIPTIONS_MAX {
            return Err(Error::Config(format!("a server keeps at most {SUBSCRIPTIONS_MAX} subscriptions")));
        }
        let durable = Durable {
            version: RECORD_VERSION,
            name: name.to_owned(),
            view: view.to_owned(),
            start,
            acked: None,
            max_retained_epochs,
        };
        self.store(&mut all, name, Some(durable))?;
        drop(all);
        self.refresh_holds();
        Ok(true)
    }

    /// Acknowledges `name` through `epoch`: the new position (an older
    /// epoch than the current one changes nothing). None: no such subscription.
    pub(crate) fn ack(&self, name: &str, epoch: Epoch) -> Result<Option<Epoch>> {
        let mut all = self.all();
        let Some(current) = all.get(name).cloned() else { return Ok(None) };
        if current.acked.is_some_and(|acked| acked >= epoch) {
            return Ok(current.acked);
        }
        let updated = Durable { acked: Some(epoch), ..current };
        self.store(&mut all, name, Some(updated))?;
        drop(all);
        self.refresh_holds();
        Ok(Some(epoch))
    }

    /// Drops `name`, releasing its hold; false if there was none.
    pub(crate) fn drop_subscription(&self, name: &str) -> Result<bool> {
        let mut all = self.all();
        if !all.contains_key(name) {
            return Ok(false);
        }
        self.store(&mut all, name, None)?;
        drop(all);
        self.refresh_holds();
        Ok(true)
    }

    /// Every subscription with its lag and state, by name.
    pub(crate) fn statuses(&self, meta: Option<&CheckpointMeta>) -> Vec<SubscriptionStatus> {
        let committed = meta.map_or(0, |m| m.epoch);
        self.all()
            .values()
            .map(|durable| {
                let (position, _) = durable.position();
                let lag_epochs = committed.saturating_sub(position);
                let topic = meta.and_then(|m| m.views.get(&durable.view));
                let compacted = topic.and_then(|t| meta.and_then(|m| m.compactable.get(t))).map_or(0, |(e, _)| *e);
                let state = if topic.is_none() || position < compacted {
                    "lost"
                } else if lag_epochs > durable.max_retained_epochs {
                    "lagging"
                } else {
                    "active"
                };
                SubscriptionStatus { durable: durable.clone(), committed, lag_epochs, state }
            })
            .collect()
    }
}
