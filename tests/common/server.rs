//! A `millpond serve` process for the crash tests (`serve_kill9.rs`,
//! `kafka_kill9.rs`): started on free loopback ports, its addresses read
//! from `server.json`, killed with SIGKILL; psql against it; a seeded
//! xorshift for the tests' choices.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// xorshift64: the tests' choices, replayed by seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub struct Server {
    dir: PathBuf,
    child: Child,
    /// The Postgres endpoint's port.
    pub port: u16,
    /// The Kafka endpoint's `host:port`, when started with one.
    pub kafka: Option<String>,
}

/// A test that fails leaves no server behind.
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `millpond serve` on `dir` with 50 ms epochs, its Kafka endpoint too if `kafka`.
    pub fn start(dir: &Path, kafka: bool) -> Server {
        Server::start_on(dir, kafka.then_some("127.0.0.1:0"))
    }

    /// [`Server::start`] with the Kafka endpoint on `kafka_listen` (a fixed
    /// address lets clients reconnect to a restarted server).
    pub fn start_on(dir: &Path, kafka_listen: Option<&str>) -> Server {
        let kafka = kafka_listen.is_some();
        let address = dir.join("server.json");
        let _ = std::fs::remove_file(&address);
        let mut command = Command::new(env!("CARGO_BIN_EXE_millpond"));
        command.arg("--data-dir").arg(dir).args(["serve", "--pg-listen", "127.0.0.1:0", "--epoch-ms", "50"]);
        if let Some(listen) = kafka_listen {
            command.args(["--kafka-listen", listen]);
        }
        let child = command.stderr(Stdio::null()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let (port, kafka) = loop {
            if let Ok(text) = std::fs::read_to_string(&address)
                && let Ok(record) = serde_json::from_str::<serde_json::Value>(&text)
                && let Some(pg) = record["pg"].as_str()
                && (!kafka || record["kafka"].is_string())
            {
                let port = pg.rsplit(':').next().unwrap().parse().unwrap();
                break (port, record["kafka"].as_str().map(str::to_owned));
            }
            assert!(Instant::now() < deadline, "the server never wrote its addresses");
            std::thread::sleep(Duration::from_millis(20));
        };
        Server { dir: dir.to_owned(), child, port, kafka }
    }

    /// Kills the server with SIGKILL; its data directory.
    pub fn kill(mut self) -> PathBuf {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        std::mem::take(&mut self.dir)
    }
}

/// psql's unaligned, tab-separated rows, or its error.
pub fn psql(port: u16, sql: &str) -> Result<Vec<Vec<String>>, String> {
    let output = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "millpond", "-X", "-q", "-A", "-t", "-F", "\t"])
        .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .expect("psql runs (.ci/run installs postgresql-client)");
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text.lines().filter(|l| !l.is_empty()).map(|l| l.split('\t').map(str::to_owned).collect()).collect())
}
