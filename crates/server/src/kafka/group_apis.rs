//! The consumer-group APIs over [`super::groups`] and the log's committed
//! offsets: FindCoordinator (this broker, for groups and transactional
//! ids alike), JoinGroup, SyncGroup, Heartbeat, LeaveGroup (one member, or
//! many from v3), OffsetCommit, OffsetFetch, DescribeGroups, ListGroups.
//!
//! Committed offsets are the log's `__consumer_offsets` records (what
//! `millpond consume --group` and `COPY … WITH (GROUP …)` read and write),
//! synced before OffsetCommit answers; the commit metadata string is not
//! kept (OffsetFetch answers it empty).

use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
use kafka_protocol::messages::{
    BrokerId, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Broker;
use super::errors::wire;
use super::frame::{Body, FrameError, text};
use super::groups::{Join, JoinAnswer, Joined, State, SyncAnswer};

fn code(error: Option<ResponseError>) -> i16 {
    error.map_or(0, |e| e.code())
}

pub(crate) fn find_coordinator(
    broker: &Broker,
    request: &FindCoordinatorRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let mut response = FindCoordinatorResponse::default();
    let (host, port) = (text(&broker.advertised.ip().to_string()), i32::from(broker.advertised.port()));
    if version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let mut coordinator = Coordinator::default();
                coordinator.key = key.clone();
                coordinator.node_id = BrokerId(super::NODE_ID);
                (coordinator.host, coordinator.port) = (host.clone(), port);
                coordinator
            })
            .collect();
    } else {
        response.node_id = BrokerId(super::NODE_ID);
        (response.host, response.port) = (host, port);
    }
    Body::encode(&response, version)
}

pub(crate) async fn join_group(
    broker: Arc<Broker>,
    request: JoinGroupRequest,
    client_id: String,
    client_host: String,
    version: i16,
) -> Result<Body, FrameError> {
    let join = Join {
        group: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        client_id,
        client_host,
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout serves for it.
        rebalance_timeout_ms: if version == 0 { request.session_timeout_ms } else { request.rebalance_timeout_ms },
        protocol_type: request.protocol_type.to_string(),
        protocols: request.protocols.iter().map(|p| (p.name.to_string(), p.metadata.clone())).collect(),
        member_id_required: version >= 4,
    };
    let member_id = join.member_id.clone();
    let joined = match broker.groups.join(join, Instant::now()) {
        JoinAnswer::Now(joined) => joined,
        JoinAnswer::Later(receiver) => {
            receiver.await.unwrap_or_else(|_| Joined::refused(ResponseError::RebalanceInProgress, &member_id))
        }
    };
    let mut response = JoinGroupResponse::default();
    response.error_code = code(joined.error);
    response.generation_id = joined.generation;
    response.protocol_type = Some(text(&joined.protocol_type));
    response.protocol_name = Some(text(&joined.protocol));
    response.leader = text(&joined.leader);
    response.member_id = text(&joined.member_id);
    response.members = joined
        .members
        .into_iter()
        .map(|(id, metadata)| {
            let mut member = JoinGroupResponseMember::default();
            member.member_id = text(&id);
            member.metadata = metadata;
            member
        })
        .collect();
    Body::encode(&response, version)
}

pub(crate) async fn sync_group(
    broker: Arc<Broker>,
    request: SyncGroupRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let assignments = request.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.clone())).collect();
    let answer =
        broker.groups.sync(&request.group_id.0, request.generation_id, &request.member_id, assignments, Instant::now());
    let synced = match answer {
        SyncAnswer::Now(synced) => synced,
        SyncAnswer::Later(receiver) => receiver.await.unwrap_or(Err(ResponseError::RebalanceInProgress)),
    };
    let mut response = SyncGroupResponse::default();
    match synced {
        Ok((protocol_type, protocol, assignment)) => {
            response.protocol_type = Some(text(&protocol_type));
            response.protocol_name = Some(text(&protocol));
            response.assignment = assignment;
        }
        Err(error) => response.error_code = error.code(),
    }
    Body::encode(&response, version)
}

pub(crate) fn heartbeat(broker: &Broker, request: &HeartbeatRequest, version: i16) -> Result<Body, FrameError> {
    let mut response = HeartbeatResponse::default();
    let error = broker.groups.heartbeat(&request.group_id.0, request.generation_id, &request.member_id, Instant::now());
    response.error_code = code(error.or_else(|| {
        // No live group at all: the member is unknown.
        broker.groups.describe(&request.group_id.0).is_none().then_some(ResponseError::UnknownMemberId)
    }));
    Body::encode(&response, version)
}

pub(crate) fn leave_group(broker: &Broker, request: &LeaveGroupRequest, version: i16) -> Result<Body, FrameError> {
    let mut response = LeaveGroupResponse::default();
    let now = Instant::now();
    if version < 3 {
        let was = broker.groups.leave(&request.group_id.0, &request.member_id, now);
        response.error_code = code((!was).then_some(ResponseError::UnknownMemberId));
    } else {
        response.members = request
            .members
            .iter()
            .map(|identity| {
                let mut member = MemberResponse::default();
                member.member_id = identity.member_id.clone();
                let was = broker.groups.leave(&request.group_id.0, &identity.member_id, now);
                member.error_code = code((!was).then_some(ResponseError::UnknownMemberId));
                member
            })
            .collect();
    }
    Body::encode(&response, version)
}

pub(crate) fn offset_commit(broker: &Broker, request: &OffsetCommitRequest, version: i16) -> Result<Body, FrameError> {
    let group = request.group_id.0.to_string();
    let refused = broker.groups.may_commit(&group, request.generation_id_or_member_epoch, &request.member_id);
    let mut response = OffsetCommitResponse::default();
    for topic in &request.topics {
        let mut answered = OffsetCommitResponseTopic::default();
        answered.name = topic.name.clone();
        for asked in &topic.partitions {
            let mut partition = OffsetCommitResponsePartition::default();
            partition.partition_index = asked.partition_index;
            partition.error_code = match refused {
                Some(error) => error.code(),
                None => commit_one(broker, &group, &topic.name.0, asked.partition_index, asked.committed_offset),
            };
            answered.partitions.push(partition);
        }
        response.topics.push(answered);
    }
    Body::encode(&response, version)
}

fn commit_one(broker: &Broker, group: &str, topic: &str, partition: i32, offset: i64) -> i16 {
    let (Ok(partition), Ok(offset)) = (u32::try_from(partition), u64::try_from(offset)) else {
        return ResponseError::UnknownTopicOrPartition.code();
    };
    if topic.starts_with("__") {
        return ResponseError::TopicAuthorizationFailed.code();
    }
    match broker.engine.topics().commit_group_offset(group, topic, partition, offset) {
        Ok(()) => 0,
        Err(error) => wire(&error).code,
    }
}

pub(crate) fn offset_fetch(broker: &Broker, request: &OffsetFetchRequest, version: i16) -> Result<Body, FrameError> {
    let group = request.group_id.0.to_string();
    let topics = broker.engine.topics();
    let asked: Vec<(TopicName, Vec<i32>)> = match &request.topics {
        Some(list) => list.iter().map(|t| (t.name.clone(), t.partition_indexes.clone())).collect(),
        None => {
            let mut all: Vec<(TopicName, Vec<i32>)> = Vec::new();
            for (topic, partition, _) in topics.group_offsets(&group) {
                match all.last_mut() {
                    Some((name, partitions)) if name.0.as_str() == topic => partitions.push(partition as i32),
                    _ => all.push((TopicName(text(&topic)), vec![partition as i32])),
                }
            }
            all
        }
    };
    let mut response = OffsetFetchResponse::default();
    response.topics = asked
        .into_iter()
        .map(|(name, partitions)| {
            let mut answered = OffsetFetchResponseTopic::default();
            answered.partitions = partitions
                .into_iter()
                .map(|index| {
                    let mut partition = OffsetFetchResponsePartition::default();
                    partition.partition_index = index;
                    partition.committed_leader_epoch = -1;
                    partition.metadata = Some(StrBytes::default());
                    let committed = u32::try_from(index).ok().and_then(|p| topics.committed_offset(&group, &name.0, p));
                    partition.committed_offset = committed.map_or(-1, |o| o as i64);
                    partition
                })
                .collect();
            answered.name = name;
            answered
        })
        .collect();
    Body::encode(&response, version)
}

pub(crate) fn describe_groups(
    broker: &Broker,
    request: &DescribeGroupsRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let mut response = DescribeGroupsResponse::default();
    response.groups = request
        .groups
        .iter()
        .map(|id| {
            let mut group = DescribedGroup::default();
            group.group_id = id.clone();
            match broker.groups.describe(&id.0) {
                Some(described) => {
                    group.group_state = text(described.state.name());
                    group.protocol_type = text(&described.protocol_type);
                    group.protocol_data = text(&described.protocol);
                    group.members = described
                        .members
                        .into_iter()
                        .map(|(member_id, client_id, host, metadata, assignment)| {
                            let mut member = DescribedGroupMember::default();
                            (member.member_id, member.client_id, member.client_host) =
                                (text(&member_id), text(&client_id), text(&host));
                            (member.member_metadata, member.member_assignment) = (metadata, assignment);
                            member
                        })
                        .collect();
                }
                // Offsets only (or nothing at all): Kafka says Empty or Dead.
                None if broker.engine.topics().group_offsets(&id.0).is_empty() => group.group_state = text("Dead"),
                None => (group.group_state, group.protocol_type) = (text(State::Empty.name()), text("consumer")),
            }
            group
        })
        .collect();
    Body::encode(&response, version)
}

pub(crate) fn list_groups(broker: &Broker, _request: &ListGroupsRequest, version: i16) -> Result<Body, FrameError> {
    let mut listed: Vec<(String, String, String)> =
        broker.groups.list().into_iter().map(|(id, state, kind)| (id, state.name().to_owned(), kind)).collect();
    for group in broker.engine.topics().groups() {
        if !listed.iter().any(|(id, _, _)| *id == group) {
            listed.push((group, State::Empty.name().to_owned(), "consumer".to_owned()));
        }
    }
    listed.sort();
    let mut response = ListGroupsResponse::default();
    response.groups = listed
        .into_iter()
        .map(|(id, state, kind)| {
            let mut group = ListedGroup::default();
            group.group_id = GroupId(text(&id));
            (group.group_state, group.protocol_type, group.group_type) = (text(&state), text(&kind), text("classic"));
            group
        })
        .collect();
    Body::encode(&response, version)
}
