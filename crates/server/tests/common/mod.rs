//! What the server's tests share: an engine and its Postgres endpoint on a
//! fresh data directory, and a tokio-postgres client of it.
use std::net::SocketAddr;
use std::sync::Arc;

use millpond_server::{Engine, EngineConfig, PgConfig, PgEndpoint};
use tokio_postgres::{Client, NoTls};

/// An engine on `dir` (50 ms epochs) and its endpoint on a free loopback port.
pub(crate) fn serve(dir: &std::path::Path) -> (Arc<Engine>, PgEndpoint) {
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir) }).unwrap();
    let endpoint = PgEndpoint::start(engine.clone(), PgConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
    (engine, endpoint)
}

/// A connected client (its connection driven on the test's runtime).
pub(crate) async fn connect(addr: SocketAddr) -> Client {
    let (client, connection) =
        tokio_postgres::connect(&format!("host={} port={} user=millpond", addr.ip(), addr.port()), NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    client
}
