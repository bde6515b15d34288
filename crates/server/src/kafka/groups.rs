//! The group coordinator of Kafka's classic consumer-group protocol:
//! members join a group, one round of joins makes a generation, its
//! leader's assignment reaches every member through SyncGroup, heartbeats
//! keep members in, and a member that leaves, stops heartbeating for its
//! session timeout, or does not rejoin within its rebalance timeout starts
//! or ends a rebalance without it.
//!
//! States, as Kafka names them: `Empty` (no member), `PreparingRebalance`
//! (members are (re)joining; JoinGroup answers wait until every member has
//! joined, or the rebalance timeout passed), `CompletingRebalance` (the
//! generation is made; SyncGroup answers wait for the leader's),
//! `Stable`. A join into an empty group waits [`INITIAL_REBALANCE_DELAY_MS`]
//! for others (Kafka's `group.initial.rebalance.delay.ms`, shorter).
//!
//! Groups live in memory: a restart empties them, and members rejoin (as
//! after a coordinator move in Kafka); the offsets they commit are the
//! log's `__consumer_offsets` records (`group_offsets`), kept across
//! restarts and shared with `millpond consume --group`.
//!
//! Invariants: a generation's members are exactly those that joined in its
//! round; its leader is one of them; an answer that waits is answered once
//! (joined, synced, or refused when the round it waited for is abandoned);
//! a member's assignment is only ever its generation's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

/// How long a join into an empty group waits for more members.
pub const INITIAL_REBALANCE_DELAY_MS: u64 = 300;
/// Members of one group at most (more are refused GROUP_MAX_SIZE_REACHED).
pub(crate) const GROUP_MEMBERS_MAX: usize = 1000;
/// Session timeouts accepted (Kafka's group.min/max.session.timeout.ms).
pub(crate) const SESSION_TIMEOUT_MS_MIN: i32 = 1_000;
pub(crate) const SESSION_TIMEOUT_MS_MAX: i32 = 1_800_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl State {
    pub(crate) fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
        }
    }
}

/// A JoinGroup as the coordinator sees it.
#[derive(Clone, Debug)]
pub(crate) struct Join {
    pub(crate) group: String,
    pub(crate) member_id: String,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) session_timeout_ms: i32,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) protocol_type: String,
    /// Protocol names with their metadata, in the member's preference order.
    pub(crate) protocols: Vec<(String, Bytes)>,
    /// Whether the client takes MEMBER_ID_REQUIRED (JoinGroup v4+).
    pub(crate) member_id_required: bool,
}

/// What a JoinGroup is answered with.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Joined {
    pub(crate) error: Option<ResponseError>,
    pub(crate) generation: i32,
    pub(crate) protocol_type: String,
    pub(crate) protocol: String,
    pub(crate) leader: String,
    pub(crate) member_id: String,
    /// For the leader: every member with its metadata for the chosen protocol.
    pub(crate) members: Vec<(String, Bytes)>,
}

impl Joined {
    pub(crate) fn refused(error: ResponseError, member_id: &str) -> Joined {
        Joined {
            error: Some(error),
            generation: -1,
            protocol_type: String::new(),
            protocol: String::new(),
            leader: String::new(),
            member_id: member_id.to_owned(),
            members: Vec::new(),
        }
    }
}

/// What a SyncGroup is answered with.
pub(crate) type Synced = Result<(String, String, Bytes), ResponseError>;

/// A JoinGroup's answer: now, or once the round completes.
#[derive(Debug)]
pub(crate) enum JoinAnswer {
    Now(Joined),
    Later(oneshot::Receiver<Joined>),
}

/// A SyncGroup's answer: now, or once the leader's assignment comes.
#[derive(Debug)]
pub(crate) enum SyncAnswer {
    Now(Synced),
    Later(oneshot::Receiver<Synced>),
}

#[derive(Debug)]
struct Member {
    client_id: String,
    client_host: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocols: Vec<(String, Bytes)>,
    last_heard: Instant,
    /// Joined in the current round (PreparingRebalance).
    joined: bool,
    join_waiter: Option<oneshot::Sender<Joined>>,
    sync_waiter: Option<oneshot::Sender<Synced>>,
    assignment: Bytes,
}

#[derive(Debug)]
struct Group {
    state: State,
    generation: i32,
    protocol_type: String,
    protocol: String,
    leader: String,
    members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined.
    pending: HashMap<String, Instant>,
    /// When PreparingRebalance ends whoever has not rejoined.
    round_deadline: Option<Instant>,
    /// How long a join into the empty group waits for more members.
    initial_delay: Duration,
}

impl Group {
    fn new(initial_delay: Duration) -> Group {
        Group {
            initial_delay,
            state: State::Empty,
            generation: 0,
            protocol_type: String::new(),
            protocol: String::new(),
            leader: String::new(),
            members: BTreeMap::new(),
            pending: HashMap::new(),
            round_deadline: None,
        }
    }

    /// Starts a round: every member must join again.
    fn prepare_rebalance(&mut self, now: Instant) {
        let initial = self.state == State::Empty || self.members.is_empty();
        for member in self.members.values_mut() {
            if let Some(waiter) = member.sync_waiter.take() {
                let _ = waiter.send(Err(ResponseError::RebalanceInProgress));
            }
            if self.state != State::PreparingRebalance {
                member.joined = false;
            }
        }
        let timeout = self.members.values().map(|m| m.rebalance_timeout).max().unwrap_or_default();
        let delay = if initial { self.initial_delay } else { timeout };
        if self.state != State::PreparingRebalance {
            self.round_deadline = Some(now + delay);
        }
        self.state = State::PreparingRebalance;
    }

    /// Makes the generation if the round is over: every member joined
    /// (after the initial delay for a group that was empty), or its deadline
    /// passed (members that did not join are removed).
    fn maybe_complete_round(&mut self, now: Instant) {
        if self.state != State::PreparingRebalance {
            return;
        }
        let deadline_passed = self.round_deadline.is_none_or(|d| now >= d);
        let all_joined = self.members.values().all(|m| m.joined);
        let waiting_initial = self.generation == 0 && !deadline_passed;
        if !(deadline_passed || (all_joined && !waiting_initial)) {
            return;
        }
        self.members.retain(|_, m| m.joined);
        self.generation += 1;
        self.round_deadline = None;
        if self.members.is_empty() {
            self.state = State::Empty;
            self.protocol.clear();
            self.leader.clear();
            return;
        }
        self.protocol = self.choose_protocol();
        if !self.members.contains_key(&self.leader) {
            self.leader = self.members.keys().next().expect("members").clone();
        }
        self.state = State::CompletingRebalance;
        let metadata: Vec<(String, Bytes)> = self
            .members
            .iter()
            .map(|(id, m)| {
                (
                    id.clone(),
                    m.protocols.iter().find(|(n, _)| *n == self.protocol).map(|(_, b)| b.clone()).unwrap_or_default(),
                )
            })
            .collect();
        for (id, member) in &mut self.members {
            member.assignment = Bytes::new();
            let joined = Joined {
                error: None,
                generation: self.generation,
                protocol_type: self.protocol_type.clone(),
                protocol: self.protocol.clone(),
                leader: self.leader.clone(),
                member_id: id.clone(),
                members: if *id == self.leader { metadata.clone() } else { Vec::new() },
            };
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(joined);
            }
        }
        debug_assert!(self.members.contains_key(&self.leader));
    }

    /// The protocol every member supports that most members prefer first
    /// (Kafka's vote; ties to the earliest in the leader's list).
    fn choose_protocol(&self) -> String {
        let first = self.members.values().next().expect("members");
        let supported = |name: &str| self.members.values().all(|m| m.protocols.iter().any(|(n, _)| n == name));
        let candidates: Vec<&String> = first.protocols.iter().map(|(n, _)| n).filter(|n| supported(n)).collect();
        let votes = |name: &str| {
            self.members
                .values()
                .filter(|m| m.protocols.iter().find(|(n, _)| supported(n)).is_some_and(|(n, _)| n == name))
                .count()
        };
        candidates
            .iter()
            .max_by_key(|n| (votes(n), std::cmp::Reverse(candidates.iter().position(|c| c == *n))))
            .map_or_else(String::new, |n| (*n).clone())
    }

    fn remove(&mut self, member_id: &str, now: Instant) {
        if let Some(mut member) = self.members.remove(member_id) {
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(Joined::refused(ResponseError::UnknownMemberId, member_id));
            }
            if let Some(waiter) = member.sync_waiter.take() {
                let _ = waiter.send(Err(ResponseError::UnknownMemberId));
            }
            if self.members.is_empty() && self.state != State::PreparingRebalance {
                self.state = State::Empty;
                self.generation += 1;
                self.protocol.clear();
                self.leader.clear();
            } else {
                self.prepare_rebalance(now);
                self.maybe_complete_round(now);
            }
        }
    }
}

/// Every live group of this endpoint.
#[derive(Debug)]
pub(crate) struct Groups {
    groups: Mutex<HashMap<String, Group>>,
    next_member: std::sync::atomic::AtomicU64,
    /// How long a join into an empty group waits for more members.
    initial_delay: Duration,
}

impl Default for Groups {
    fn default() -> Groups {
        Groups::new(INITIAL_REBALANCE_DELAY_MS)
    }
}

impl Groups {
    /// Groups whose first join waits `initial_delay_ms` for more members
    /// (Kafka's `group.initial.rebalance.delay.ms`).
    pub(crate) fn new(initial_delay_ms: u64) -> Groups {
        let initial_delay = Duration::from_millis(initial_delay_ms);
        Groups { groups: Mutex::default(), next_member: std::sync::atomic::AtomicU64::new(0), initial_delay }
    }

    pub(crate) fn join(&self, join: Join, now: Instant) -> JoinAnswer {
        let refuse = |e, id: &str| JoinAnswer::Now(Joined::refused(e, id));
        if join.group.is_empty() {
            return refuse(ResponseError::InvalidGroupId, &join.member_id);
        }
        if !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&join.session_timeout_ms) {
            return refuse(ResponseError::InvalidSessionTimeout, &join.member_id);
        }
        if join.protocols.is_empty() || join.protocol_type.is_empty() {
            return refuse(ResponseError::InconsistentGroupProtocol, &join.member_id);
        }
        let mut groups = self.groups.lock().expect("groups lock");
        let group = groups.entry(join.group.clone()).or_insert_with(|| Group::new(self.initial_delay));
        if group.state != State::Empty && group.protocol_type != join.protocol_type {
            return refuse(ResponseError::InconsistentGroupProtocol, &join.member_id);
        }
        let known = group.members.contains_key(&join.member_id) || group.pending.remove(&join.member_id).is_some();
        let member_id = if join.member_id.is_empty() {
            let n = self.next_member.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let id = format!("{}-{n:016x}-{:08x}", join.client_id, std::process::id());
            if join.member_id_required {
                group.pending.insert(id.clone(), now);
                return refuse(ResponseError::MemberIdRequired, &id);
            }
            id
        } else if !known {
            return refuse(ResponseError::UnknownMemberId, &join.member_id);
        } else {
            join.member_id.clone()
        };
        if !group.members.contains_key(&member_id) && group.members.len() >= GROUP_MEMBERS_MAX {
            return refuse(ResponseError::GroupMaxSizeReached, &member_id);
        }
        if group.state == State::Empty {
            group.protocol_type = join.protocol_type.clone();
        }
        let (sender, receiver) = oneshot::channel();
        let member = Member {
            client_id: join.client_id,
            client_host: join.client_host,
            session_timeout: Duration::from_millis(join.session_timeout_ms as u64),
            rebalance_timeout: Duration::from_millis(join.rebalance_timeout_ms.max(join.session_timeout_ms) as u64),
            protocols: join.protocols,
            last_heard: now,
            joined: true,
            join_waiter: Some(sender),
            sync_waiter: None,
            assignment: Bytes::new(),
        };
        if let Some(waiter) = group.members.insert(member_id.clone(), member).and_then(|old| old.join_waiter) {
            let _ = waiter.send(Joined::refused(ResponseError::RebalanceInProgress, &member_id));
        }
        group.prepare_rebalance(now);
        group.members.get_mut(&member_id).expect("inserted").joined = true;
        group.maybe_complete_round(now);
        JoinAnswer::Later(receiver)
    }

    pub(crate) fn sync(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> SyncAnswer {
        let mut groups = self.groups.lock().expect("groups lock");
        let Some(group) = groups.get_mut(group_id) else {
            return SyncAnswer::Now(Err(ResponseError::UnknownMemberId));
        };
        let Some(member) = group.members.get_mut(member_id) else {
            return SyncAnswer::Now(Err(ResponseError::UnknownMemberId));
        };
        member.last_heard = now;
        if generation != group.generation {
            return SyncAnswer::Now(Err(ResponseError::IllegalGeneration));
        }
        match group.state {
            State::Empty | State::PreparingRebalance => SyncAnswer::Now(Err(ResponseError::RebalanceInProgress)),
            State::Stable => {
                SyncAnswer::Now(Ok((group.protocol_type.clone(), group.protocol.clone(), member.assignment.clone())))
            }
            State::CompletingRebalance => {
                let (sender, receiver) = oneshot::channel();
                member.sync_waiter = Some(sender);
                if member_id == group.leader {
                    let mut assigned: HashMap<String, Bytes> = assignments.into_iter().collect();
                    group.state = State::Stable;
                    for (id, member) in &mut group.members {
                        member.assignment = assigned.remove(id).unwrap_or_default();
                        if let Some(waiter) = member.sync_waiter.take() {
                            let _ = waiter.send(Ok((
                                group.protocol_type.clone(),
                                group.protocol.clone(),
                                member.assignment.clone(),
                            )));
                        }
                    }
                }
                SyncAnswer::Later(receiver)
            }
        }
    }

    pub(crate) fn heartbeat(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        now: Instant,
    ) -> Option<ResponseError> {
        let mut groups = self.groups.lock().expect("groups lock");
        let group = groups.get_mut(group_id)?;
        let Some(member) = group.members.get_mut(member_id) else { return Some(ResponseError::UnknownMemberId) };
        member.last_heard = now;
        match group.state {
            State::Empty => Some(ResponseError::UnknownMemberId),
            State::PreparingRebalance => Some(ResponseError::RebalanceInProgress),
            _ if generation != group.generation => Some(ResponseError::IllegalGeneration),
            _ => None,
        }
    }

    /// Removes `member_id` from `group_id`; whether it was a member.
    pub(crate) fn leave(&self, group_id: &str, member_id: &str, now: Instant) -> bool {
        let mut groups = self.groups.lock().expect("groups lock");
        let Some(group) = groups.get_mut(group_id) else { return false };
        let was = group.members.contains_key(member_id);
        group.remove(member_id, now);
        was
    }

    /// Whether a commit of `generation` by `member_id` may go through
    /// (Kafka's rules: a simple commit, generation < 0, into a group with
    /// no members; else the member of the current generation, not while
    /// the generation's assignment is being handed out).
    pub(crate) fn may_commit(&self, group_id: &str, generation: i32, member_id: &str) -> Option<ResponseError> {
        let groups = self.groups.lock().expect("groups lock");
        let group = groups.get(group_id);
        match group {
            None if generation < 0 => None,
            None => Some(ResponseError::IllegalGeneration),
            Some(g) if generation < 0 && g.state == State::Empty => None,
            Some(g) if g.state == State::CompletingRebalance => Some(ResponseError::RebalanceInProgress),
            Some(g) if !g.members.contains_key(member_id) => Some(ResponseError::UnknownMemberId),
            Some(g) if g.generation != generation => Some(ResponseError::IllegalGeneration),
            Some(_) => None,
        }
    }

    /// Whether a transactional commit (TxnOffsetCommit) of `generation` by
    /// `member_id` may go through, as Kafka's coordinator decides (KIP-447):
    /// a request that names neither (v0-2, or a producer that does not use
    /// the group's metadata) is not checked; one that does must be the
    /// current generation's member, which fences a zombie consumer's
    /// transaction. Unlike a plain commit, a rebalance's hand-out does not
    /// refuse it.
    pub(crate) fn may_commit_in_txn(&self, group_id: &str, generation: i32, member_id: &str) -> Option<ResponseError> {
        if generation < 0 && member_id.is_empty() {
            return None;
        }
        let groups = self.groups.lock().expect("groups lock");
        match groups.get(group_id) {
            None => Some(ResponseError::IllegalGeneration),
            Some(g) if !g.members.contains_key(member_id) => Some(ResponseError::UnknownMemberId),
            Some(g) if g.generation != generation => Some(ResponseError::IllegalGeneration),
            Some(_) => None,
        }
    }

    /// Ends what time ends: members silent past their session timeout,
    /// rounds past their deadline, member ids handed out and never used.
    pub(crate) fn tick(&self, now: Instant) {
        let mut groups = self.groups.lock().expect("groups lock");
        for group in groups.values_mut() {
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| m.join_waiter.is_none() && now.duration_since(m.last_heard) > m.session_timeout)
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                group.remove(&id, now);
            }
            group
                .pending
                .retain(|_, at| now.duration_since(*at) < Duration::from_millis(SESSION_TIMEOUT_MS_MAX as u64));
            group.maybe_complete_round(now);
        }
    }

    /// A group's state, protocol type and chosen protocol, and its members:
    /// id, client id, host, metadata, assignment. None: no live group.
    pub(crate) fn describe(&self, group_id: &str) -> Option<Described> {
        let groups = self.groups.lock().expect("groups lock");
        let group = groups.get(group_id)?;
        let members = group
            .members
            .iter()
            .map(|(id, m)| {
                let metadata =
                    m.protocols.iter().find(|(n, _)| *n == group.protocol).map(|(_, b)| b.clone()).unwrap_or_default();
                (id.clone(), m.client_id.clone(), m.client_host.clone(), metadata, m.assignment.clone())
            })
            .collect();
        Some(Described {
            state: group.state,
            protocol_type: group.protocol_type.clone(),
            protocol: group.protocol.clone(),
            members,
        })
    }

    /// Every live group with its state and protocol type.
    pub(crate) fn list(&self) -> Vec<(String, State, String)> {
        let groups = self.groups.lock().expect("groups lock");
        let mut out: Vec<_> = groups.iter().map(|(id, g)| (id.clone(), g.state, g.protocol_type.clone())).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// A group as DescribeGroups shows it.
#[derive(Debug)]
pub(crate) struct Described {
    pub(crate) state: State,
    pub(crate) protocol_type: String,
    pub(crate) protocol: String,
    pub(crate) members: Vec<(String, String, String, Bytes, Bytes)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(member_id: &str) -> Join {
        Join {
            group: "g".into(),
            member_id: member_id.into(),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"m"))],
            member_id_required: true,
        }
    }

    /// Joins as a new member: the MEMBER_ID_REQUIRED round trip, then the join.
    fn new_member(groups: &Groups, now: Instant) -> (String, oneshot::Receiver<Joined>) {
        let JoinAnswer::Now(refused) = groups.join(join(""), now) else { panic!("a first join is answered at once") };
        assert_eq!(refused.error, Some(ResponseError::MemberIdRequired));
        let JoinAnswer::Later(receiver) = groups.join(join(&refused.member_id), now) else { panic!("a join waits") };
        (refused.member_id, receiver)
    }

    #[test]
    fn three_members_make_one_generation_and_one_leaving_makes_the_next() {
        let groups = Groups::default();
        let t0 = Instant::now();
        let mut joined: Vec<(String, oneshot::Receiver<Joined>)> = (0..3).map(|_| new_member(&groups, t0)).collect();
        groups.tick(t0 + Duration::from_millis(10));
        assert!(joined[0].1.try_recv().is_err(), "the initial delay is not over");
        groups.tick(t0 + Duration::from_millis(INITIAL_REBALANCE_DELAY_MS + 1));
        let answers: Vec<Joined> = joined.iter_mut().map(|(_, r)| r.try_recv().unwrap()).collect();
        assert!(answers.iter().all(|a| a.error.is_none() && a.generation == 1 && a.protocol == "range"));
        let leader = answers[0].leader.clone();
        assert_eq!(answers.iter().filter(|a| !a.members.is_empty()).count(), 1, "only the leader gets the members");
        assert_eq!(answers.iter().find(|a| a.member_id == leader).unwrap().members.len(), 3);
        // The followers' syncs wait for the leader's.
        let t1 = t0 + Duration::from_secs(1);
        let ids: Vec<String> = joined.iter().map(|(id, _)| id.clone()).collect();
        let followers: Vec<&String> = ids.iter().filter(|id| **id != leader).collect();
        let SyncAnswer::Later(mut waiting) = groups.sync("g", 1, followers[0], vec![], t1) else { panic!("waits") };
        assert!(waiting.try_recv().is_err());
        let assignments = ids.iter().map(|id| (id.clone(), Bytes::from(format!("for {id}")))).collect();
        let SyncAnswer::Later(mut led) = groups.sync("g", 1, &leader, assignments, t1) else { panic!() };
        assert_eq!(led.try_recv().unwrap().unwrap().2, Bytes::from(format!("for {leader}")));
        assert_eq!(waiting.try_recv().unwrap().unwrap().2, Bytes::from(format!("for {}", followers[0])));
        assert_eq!(groups.heartbeat("g", 1, followers[1], t1), None);
        // One leaves: the others are told to rejoin, and make generation 2.
        assert!(groups.leave("g", followers[1], t1));
        assert_eq!(groups.heartbeat("g", 1, &leader, t1), Some(ResponseError::RebalanceInProgress));
        let rejoin = |id: &str| match groups.join(join(id), t1) {
            JoinAnswer::Later(r) => r,
            JoinAnswer::Now(j) => panic!("{j:?}"),
        };
        let mut a = rejoin(&leader);
        let mut b = rejoin(followers[0]);
        let (a, b) = (a.try_recv().unwrap(), b.try_recv().unwrap());
        assert_eq!((a.generation, b.generation), (2, 2));
        assert_eq!(a.members.len() + b.members.len(), 2);
        assert_eq!(groups.describe("g").unwrap().members.len(), 2);
    }

    #[test]
    fn a_silent_member_is_removed_after_its_session_and_a_late_one_after_the_round() {
        let groups = Groups::default();
        let t0 = Instant::now();
        let (first, mut r1) = new_member(&groups, t0);
        let (second, mut r2) = new_member(&groups, t0);
        groups.tick(t0 + Duration::from_millis(INITIAL_REBALANCE_DELAY_MS + 1));
        assert_eq!(r1.try_recv().unwrap().generation, 1);
        assert_eq!(r2.try_recv().unwrap().generation, 1);
        // Only the first heartbeats; the second's session (10 s) runs out.
        let t1 = t0 + Duration::from_secs(8);
        assert_eq!(groups.heartbeat("g", 1, &first, t1), None);
        groups.tick(t0 + Duration::from_secs(11));
        assert_eq!(groups.heartbeat("g", 1, &second, t1), Some(ResponseError::UnknownMemberId));
        assert_eq!(groups.describe("g").unwrap().state, State::PreparingRebalance);
        // The first never rejoins: after the rebalance timeout the group is empty.
        groups.tick(t0 + Duration::from_secs(11 + 31));
        let described = groups.describe("g").unwrap();
        assert_eq!((described.state, described.members.len()), (State::Empty, 0));
        assert_eq!(groups.may_commit("g", -1, ""), None, "a simple commit into an empty group");
        assert_eq!(groups.may_commit("g", 1, &first), Some(ResponseError::UnknownMemberId));
        assert_eq!(groups.may_commit_in_txn("g", 1, &first), Some(ResponseError::UnknownMemberId), "a zombie");
    }

    #[test]
    fn a_transactional_commit_is_fenced_by_the_group_generation_when_it_names_one() {
        let groups = Groups::default();
        let t0 = Instant::now();
        let (member, mut joined) = new_member(&groups, t0);
        groups.tick(t0 + Duration::from_millis(INITIAL_REBALANCE_DELAY_MS + 1));
        assert_eq!(joined.try_recv().unwrap().generation, 1);
        assert_eq!(groups.may_commit_in_txn("g", 1, &member), None, "the current generation's member");
        assert_eq!(groups.may_commit_in_txn("g", -1, ""), None, "a producer that names no member (v0-2)");
        assert_eq!(groups.may_commit_in_txn("g", 0, &member), Some(ResponseError::IllegalGeneration));
        assert_eq!(groups.may_commit_in_txn("g", 1, "other"), Some(ResponseError::UnknownMemberId));
        assert_eq!(groups.may_commit_in_txn("none", 1, &member), Some(ResponseError::IllegalGeneration));
    }

    #[test]
    fn joins_that_cannot_be_served_are_refused_by_code() {
        let groups = Groups::default();
        let now = Instant::now();
        let refused = |j: Join| match groups.join(j, now) {
            JoinAnswer::Now(joined) => joined.error,
            JoinAnswer::Later(_) => None,
        };
        assert_eq!(refused(join("stranger")), Some(ResponseError::UnknownMemberId));
        assert_eq!(refused(Join { session_timeout_ms: 10, ..join("") }), Some(ResponseError::InvalidSessionTimeout));
        assert_eq!(refused(Join { group: String::new(), ..join("") }), Some(ResponseError::InvalidGroupId));
        let (_id, _waiting) = new_member(&groups, now);
        let other = Join { protocol_type: "connect".into(), member_id_required: false, ..join("") };
        assert_eq!(refused(other), Some(ResponseError::InconsistentGroupProtocol));
    }
}
