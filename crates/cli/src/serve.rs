//! `millpond serve`: one process that owns the data directory, maintains
//! every materialized view of its catalog and answers Postgres clients
//! (`millpond_server`). It writes its address into `DATA_DIR/server.json`
//! while it runs, and stops cleanly on SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use millpond_server::{Engine, EngineConfig, KafkaConfig, KafkaEndpoint, MetricsEndpoint, PgConfig, PgEndpoint};

/// The file a running server writes its address into, in the data directory.
pub(crate) const SERVER_FILE: &str = "server.json";

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Address of the Postgres wire endpoint (loopback unless told).
    #[arg(long, default_value = "127.0.0.1:6875")]
    pg_listen: SocketAddr,
    /// Address of a Kafka wire endpoint (Kafka clients produce, fetch and
    /// read views' changelogs); off unless given (127.0.0.1:9092 is Kafka's).
    #[arg(long)]
    kafka_listen: Option<SocketAddr>,
    /// The address Kafka clients are told to connect to (default: the bound one).
    #[arg(long, requires = "kafka_listen")]
    kafka_advertised: Option<SocketAddr>,
    /// Partitions of a topic that a Kafka client's Metadata request creates
    /// (Kafka's auto.create.topics.enable with num.partitions); 0: none is created.
    #[arg(long, default_value_t = 1)]
    kafka_auto_create_partitions: u32,
    /// The largest Kafka request frame read; a larger one closes its connection.
    #[arg(long, default_value_t = millpond_server::KAFKA_REQUEST_BYTES_MAX_DEFAULT)]
    kafka_request_bytes_max: usize,
    /// Most Kafka connections at once (more are closed as they come).
    #[arg(long, default_value_t = millpond_server::KAFKA_CONNECTIONS_MAX_DEFAULT)]
    kafka_connections_max: usize,
    /// Fetch reads stored batches and writes their bytes instead of sending
    /// them from the page cache with sendfile (for comparison).
    #[arg(long)]
    kafka_fetch_buffered: bool,
    /// How long the first join into an empty consumer group waits for more members (Kafka's group.initial.rebalance.delay.ms).
    #[arg(long, default_value_t = millpond_server::KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT)]
    kafka_group_initial_rebalance_delay_ms: u64,
    /// SO_SNDBUF of Kafka client sockets (Kafka's socket.send.buffer.bytes); 0: the OS's autotuning.
    #[arg(long, default_value_t = millpond_server::KAFKA_SOCKET_BUFFER_BYTES_DEFAULT)]
    kafka_socket_send_buffer_bytes: usize,
    /// SO_RCVBUF of Kafka client sockets (Kafka's socket.receive.buffer.bytes); 0: the OS's autotuning.
    #[arg(long, default_value_t = millpond_server::KAFKA_SOCKET_BUFFER_BYTES_DEFAULT)]
    kafka_socket_receive_buffer_bytes: usize,
    /// Address of a Prometheus text endpoint (`GET /metrics`); off unless given.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Most Postgres connections at once (more are refused with SQLSTATE 53300).
    #[arg(long, default_value_t = millpond_server::CONNECTIONS_MAX_DEFAULT)]
    connections_max: usize,
    /// How long a client has to send its first packet before it is closed (08P01).
    #[arg(long, default_value_t = millpond_server::STARTUP_TIMEOUT_MS_DEFAULT)]
    startup_timeout_ms: u64,
    /// Bytes of encoded changes each view keeps for its slowest subscribers;
    /// one that falls further behind is dropped (53200).
    #[arg(long, default_value_t = millpond_server::SUBSCRIBER_BUFFER_BYTES_DEFAULT)]
    subscriber_buffer_bytes: usize,
    /// How long a subscriber's client may read nothing while its socket is
    /// full before it is dropped (53200).
    #[arg(long, default_value_t = millpond_server::SUBSCRIBER_STALL_MS_DEFAULT)]
    subscriber_stall_ms: u64,
    /// Nice value of the threads that serve clients (0-19): with 19, clients
    /// get every idle cycle and, on a machine the views' dataflow saturates,
    /// about 1.5 % of a contended core (10: about a tenth; 0: an equal share).
    #[arg(long, default_value_t = millpond_server::WIRE_NICE_SERVE)]
    wire_nice: i32,
    /// Threads that serve clients (default: the cores the runtime's
    /// workers leave, at least one).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=millpond_server::WIRE_THREADS_MAX as u64))]
    wire_threads: Option<u64>,
    /// The largest message a client may send after its startup packet (a
    /// query, or a prepared statement's parameters); more is refused (54000).
    #[arg(long, default_value_t = millpond_server::MESSAGE_BYTES_MAX_DEFAULT)]
    message_bytes_max: usize,
    /// Require SCRAM-SHA-256 authentication with this password (any user
    /// name), and SASL/PLAIN with it on the Kafka endpoint; unset, clients are
    /// trusted (the endpoints bind loopback by default).
    #[arg(long, env = "MILLPOND_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// Checkpoint interval of the views.
    #[arg(long, default_value_t = 1000)]
    epoch_ms: u64,
    /// Worker threads of the runtime.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// SQL definition files executed at startup (each file's DML applies once).
    files: Vec<PathBuf>,
}

pub(crate) fn run(data_dir: &Path, args: &ServeArgs) -> Result<()> {
    let stop = crate::signals::stop_flag()?;
    let config = EngineConfig {
        workers: args.workers,
        epoch_interval_ms: args.epoch_ms,
        fanout_nice: millpond_server::fanout_nice(args.wire_nice),
        ..EngineConfig::new(data_dir)
    };
    let engine = Engine::open(config).context("opening the data directory")?;
    for file in &args.files {
        let sql = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let name = file.display().to_string();
        engine.execute_file(&sql, &name).map_err(|e| match e {
            millpond_server::Error::Sql(e) => anyhow::anyhow!("{}", e.render(&sql).trim_start_matches("error: ")),
            other => other.into(),
        })?;
    }
    let mut pg = PgConfig::new(args.pg_listen);
    pg.connections_max = args.connections_max;
    pg.startup_timeout_ms = args.startup_timeout_ms;
    pg.subscriber_buffer_bytes = args.subscriber_buffer_bytes;
    pg.subscriber_stall_ms = args.subscriber_stall_ms;
    pg.wire_nice = args.wire_nice;
    pg.wire_threads =
        args.wire_threads.map_or_else(|| millpond_server::wire_threads_default(args.workers), |n| n as usize);
    pg.message_bytes_max = args.message_bytes_max;
    pg.password = args.password.clone();
    let endpoint = PgEndpoint::start(engine.clone(), pg)?;
    let kafka = match args.kafka_listen {
        Some(listen) => {
            let mut config = KafkaConfig::new(listen);
            config.advertised = args.kafka_advertised;
            config.auto_create_partitions = Some(args.kafka_auto_create_partitions).filter(|&n| n > 0);
            config.request_bytes_max = args.kafka_request_bytes_max;
            config.connections_max = args.kafka_connections_max;
            config.fetch_zero_copy = !args.kafka_fetch_buffered;
            config.group_initial_rebalance_delay_ms = args.kafka_group_initial_rebalance_delay_ms;
            config.socket_send_buffer_bytes = Some(args.kafka_socket_send_buffer_bytes).filter(|&b| b > 0);
            config.socket_receive_buffer_bytes = Some(args.kafka_socket_receive_buffer_bytes).filter(|&b| b > 0);
            config.password = args.password.clone();
            Some(KafkaEndpoint::start(engine.clone(), config)?)
        }
        None => None,
    };
    let metrics = match args.metrics_listen {
        Some(listen) => Some(MetricsEndpoint::start(engine.clone(), endpoint.gauges().clone(), listen)?),
        None => None,
    };
    if let Some(metrics) = &metrics {
        eprintln!("metrics on http://{}/metrics", metrics.addr());
    }
    let address = data_dir.join(SERVER_FILE);
    let mut record = serde_json::json!({ "pg": endpoint.addr().to_string(), "pid": std::process::id() });
    if let Some(kafka) = &kafka {
        record["kafka"] = kafka.addr().to_string().into();
        eprintln!("kafka clients on {} (bootstrap.servers={})", kafka.addr(), kafka.addr());
    }
    if let Some(metrics) = &metrics {
        record["metrics"] = metrics.addr().to_string().into();
    }
    std::fs::write(&address, record.to_string()).with_context(|| format!("writing {}", address.display()))?;
    eprintln!(
        "serving {} on postgres://{} (psql -h {} -p {})",
        data_dir.display(),
        endpoint.addr(),
        endpoint.addr().ip(),
        endpoint.addr().port()
    );
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(metrics);
    drop(kafka);
    drop(endpoint);
    let _ = std::fs::remove_file(&address);
    engine.shutdown()?;
    Ok(())
}
