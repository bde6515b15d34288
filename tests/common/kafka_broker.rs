//! A real Apache Kafka broker for tests: Kafka 4.4.0 from the jars that
//! `.ci/run` fetches with Maven (`benches/kafka/pom.xml`, into
//! `~/.cache/millpond/kafka-4.4.0`), one KRaft broker and controller in one
//! JVM on free loopback ports, its data in a temporary directory. It can be
//! stopped with SIGKILL and started again on the same data and ports.
//! Included by path where a test needs it.
#![allow(dead_code, unreachable_pub)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where `.ci/run` puts Kafka's jars.
pub fn jars() -> PathBuf {
    PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache/millpond/kafka-4.4.0")
}

/// One running broker; killed when dropped.
pub struct KafkaBroker {
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// `127.0.0.1:PORT`, for `bootstrap.servers`.
    pub bootstrap: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn java(class: &str) -> Command {
    let jars = jars();
    assert!(
        jars.join("kafka_2.13-4.4.0.jar").exists(),
        "Apache Kafka's jars are not in {}: mvn -q -f benches/kafka/pom.xml dependency:copy-dependencies \
         -DoutputDirectory={} (.ci/run does)",
        jars.display(),
        jars.display()
    );
    let mut command = Command::new("java");
    command.arg("-Xmx512m").arg("-cp").arg(format!("{}/*", jars.display())).arg(class);
    command
}

impl KafkaBroker {
    /// Formats a new cluster and starts its broker; returns once it answers.
    pub fn start() -> KafkaBroker {
        let dir = tempfile::tempdir().unwrap();
        let (port, controller) = (free_port(), free_port());
        let properties = format!(
            "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{controller}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\nlog.dirs={}\n\
             num.partitions=1\noffsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n",
            dir.path().join("data").display()
        );
        std::fs::write(dir.path().join("server.properties"), properties).unwrap();
        let uuid = java("kafka.tools.StorageTool").arg("random-uuid").stderr(Stdio::null()).output().unwrap();
        let uuid = String::from_utf8_lossy(&uuid.stdout).lines().last().unwrap_or_default().trim().to_owned();
        let format = java("kafka.tools.StorageTool")
            .args(["format", "-t", &uuid, "-c"])
            .arg(dir.path().join("server.properties"))
            .output()
            .unwrap();
        assert!(format.status.success(), "formatting Kafka's storage: {}", String::from_utf8_lossy(&format.stderr));
        let mut broker = KafkaBroker { dir, child: None, bootstrap: format!("127.0.0.1:{port}") };
        broker.restart();
        broker
    }

    fn properties(&self) -> PathBuf {
        self.dir.path().join("server.properties")
    }

    /// Starts the broker (again) on its data; returns once it answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the broker is running");
        let log = std::fs::File::create(self.dir.path().join("kafka.log")).unwrap();
        let child = Command::new("java")
            .arg("-Xmx1g")
            .arg("-cp")
            .arg(format!("{}/*", jars().display()))
            .arg("kafka.Kafka")
            .arg(self.properties())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(90);
        while !self.answers() {
            assert!(Instant::now() < deadline, "Kafka did not start: {}", self.log_path().display());
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Kills the broker with SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("kafka.log")
    }

    /// Whether the broker answers a topic listing.
    fn answers(&self) -> bool {
        java("org.apache.kafka.tools.TopicCommand")
            .args(["--bootstrap-server", &self.bootstrap, "--list"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Creates `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: u32) {
        create_topic(&self.bootstrap, topic, partitions);
    }

    /// Grows `topic` to `partitions` partitions.
    pub fn add_partitions(&self, topic: &str, partitions: u32) {
        let output = java("org.apache.kafka.tools.TopicCommand")
            .args(["--bootstrap-server", &self.bootstrap, "--alter", "--topic", topic, "--partitions"])
            .arg(partitions.to_string())
            .output()
            .unwrap();
        assert!(output.status.success(), "altering {topic}: {}", String::from_utf8_lossy(&output.stderr));
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Creates `topic` with `partitions` partitions on the cluster at
/// `bootstrap` (Kafka's own `kafka-topics`: a real broker or Millpond's endpoint).
pub fn create_topic(bootstrap: &str, topic: &str, partitions: u32) {
    let output = java("org.apache.kafka.tools.TopicCommand")
        .args(["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions"])
        .arg(partitions.to_string())
        .output()
        .unwrap();
    assert!(output.status.success(), "creating {topic}: {}", String::from_utf8_lossy(&output.stderr));
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        self.kill();
    }
}
