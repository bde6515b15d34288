//! Commands through a running server: when `millpond serve` owns the data
//! directory (its `server.json` names a live process) or `--server ADDR`
//! is given, `millpond sql` sends its statements over the Postgres wire
//! (pgwire's client) instead of opening the directory, which the server
//! holds locked.
//!
//! Output as in the embedded case: each statement's command tag on stderr,
//! rows on stdout (tab-separated, `\N` for NULL); an error names its
//! SQLSTATE and position and exits non-zero.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use pgwire::api::client::Config;
use pgwire::api::client::auth::DefaultStartupHandler;
use pgwire::api::client::query::{DefaultSimpleQueryHandler, Response};
use pgwire::messages::response::CommandComplete;
use pgwire::tokio::client::PgWireClient;

/// The server to go through: `explicit`, else the one `data_dir/server.json`
/// names if its process is alive.
pub(crate) fn server_for(data_dir: &Path, explicit: Option<SocketAddr>) -> Option<SocketAddr> {
    if explicit.is_some() {
        return explicit;
    }
    let text = std::fs::read_to_string(data_dir.join(crate::serve::SERVER_FILE)).ok()?;
    let record: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pid = record["pid"].as_u64()?;
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return None; // a server that died without cleaning up
    }
    record["pg"].as_str()?.parse().ok()
}

/// Runs `sql` (one simple query) on the server at `addr`.
pub(crate) fn run_sql(addr: SocketAddr, sql: &str, password: Option<&str>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let mut config = Config::new();
        config.host(addr.ip().to_string()).port(addr.port()).user("millpond").dbname("millpond");
        if let Some(password) = password {
            config.password(password);
        }
        let mut client = PgWireClient::connect(Arc::new(config), DefaultStartupHandler::new(), None)
            .await
            .map_err(|e| anyhow!("connecting to the server at {addr}: {}", describe(&e)))?;
        let responses = client
            .simple_query(DefaultSimpleQueryHandler::new(), sql)
            .await
            .map_err(|e| anyhow!("{}", describe(&e)))?;
        for response in responses {
            print_response(response);
        }
        Ok(())
    })
}

fn describe(error: &pgwire::error::PgWireClientError) -> String {
    match error {
        pgwire::error::PgWireClientError::RemoteError(info) => {
            let at = info.position.as_ref().map(|p| format!(", at character {p}")).unwrap_or_default();
            format!("{} (SQLSTATE {}{at})", info.message, info.code)
        }
        other => other.to_string(),
    }
}

fn print_response(response: Response) {
    match response {
        Response::EmptyQuery => {}
        Response::Execution(tag) => eprintln!("{}", CommandComplete::from(tag).tag),
        Response::Query((tag, fields, rows)) => {
            for row in rows {
                println!("{}", fields_of(&row.data, row.field_count as usize).join("\t"));
            }
            let _ = fields;
            eprintln!("{}", CommandComplete::from(tag).tag);
        }
    }
}

/// The text fields of a DataRow's payload (`\N` for NULL).
fn fields_of(data: &[u8], count: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(count);
    let mut at = 0;
    for _ in 0..count {
        let Some(length) = data.get(at..at + 4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]])) else { break };
        at += 4;
        if length < 0 {
            out.push("\\N".to_owned());
            continue;
        }
        let end = (at + length as usize).min(data.len());
        out.push(String::from_utf8_lossy(&data[at..end]).into_owned());
        at = end;
    }
    out
}
