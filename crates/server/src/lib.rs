//! Millpond's server: one process that owns a data directory. It holds the
//! log open once and shares it between the SQL session (DDL and DML), the
//! runtime that maintains every materialized view of the catalog, and the
//! clients, so statements, views and readers run side by side.
//!
//! Module map: `engine` (the data directory, its session and its runtime
//! run), `commits` (the published checkpoint, read once for every
//! subscriber), `pg` (the Postgres wire endpoint, simple protocol), `extended` (its
//! extended protocol: Parse, Bind, Describe, Execute), `cell` (values in
//! the wire formats, parameters as literals), `subscribe` (`COPY (SUBSCRIBE
//! ...) TO STDOUT` and `SUBSCRIBE` streamed over it), `consume` (`COPY topic TO STDOUT`, a
//! topic's records, and `ACK GROUP`), `cursor` (DECLARE ...
//! CURSOR FOR SUBSCRIBE, FETCH, CLOSE), `subscription` (durable
//! subscriptions: their store and changelog holds), `durable` (their
//! statements over the wire), `metrics` (the Prometheus text endpoint),
//! `kafka` (the Kafka wire endpoint: frames, ApiVersions, Metadata,
//! Produce, Fetch, ListOffsets, transactions), `sinks` (the catalog's Kafka
//! sinks, each on a thread following its view), `error`.
//!
//! Invariant (architecture): this crate depends on `millpond-sql` and
//! `millpond-dataflow` (their public APIs) and on no lower Millpond crate.

#![forbid(unsafe_code)]

mod cell;
mod commits;
mod connection;
mod consume;
mod copy_in;
mod copy_line;
mod cursor;
mod durable;
mod engine;
mod error;
mod extended;
mod fanout;
mod flat_row;
mod kafka;
mod metrics;
mod pg;
mod priority;
mod sinks;
mod subscribe;
mod subscription;
mod view_cache;

pub use connection::MESSAGE_BYTES_MAX_DEFAULT;
pub use consume::{RecordFormat, record_line};
pub use engine::{Engine, EngineConfig, Reads, RunState, ViewStat, Writes};
pub use error::{Error, Result};
pub use fanout::SUBSCRIBER_BUFFER_BYTES_DEFAULT;
pub use kafka::{
    INITIAL_REBALANCE_DELAY_MS as KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT, KAFKA_CONNECTIONS_MAX_DEFAULT,
    KafkaConfig, KafkaEndpoint, REQUEST_BYTES_MAX_DEFAULT as KAFKA_REQUEST_BYTES_MAX_DEFAULT,
    SOCKET_BUFFER_BYTES_DEFAULT as KAFKA_SOCKET_BUFFER_BYTES_DEFAULT,
};
pub use metrics::{MetricsEndpoint, REQUEST_BYTES_MAX};
pub use pg::{CONNECTIONS_MAX_DEFAULT, Gauges, PgConfig, PgEndpoint, STARTUP_TIMEOUT_MS_DEFAULT};
pub use priority::{WIRE_NICE_DEFAULT, WIRE_NICE_SERVE, WIRE_THREADS_MAX, fanout_nice, wire_threads_default};
pub use subscribe::SUBSCRIBER_STALL_MS_DEFAULT;
pub use subscription::{
    Durable, MAX_RETAINED_EPOCHS_DEFAULT, SUBSCRIPTIONS_MAX, SUBSCRIPTIONS_TOPIC, SubscriptionStatus,
};
