//! Flink beside `millpond bench nexmark` and `millpond bench kafka`: the
//! same query, over the same input, in Apache Flink's SQL engine (RocksDB
//! state, exactly-once checkpoints every second), by `benches/flink/run.sh`
//! (Nexmark over the input's topics dumped to JSON lines) and
//! `benches/kafka/flink/run.sh` (bid_stats from a Kafka topic to a Kafka
//! topic, exactly once).
//!
//! Each script builds its runner with Maven if needed and runs one job in a
//! fresh JVM; this module starts it as a child process group (so that a
//! timeout stops the JVM too) and reads the figures of its result line.
//!
//! Invariant: a Flink figure is only ever reported for a run that printed
//! its result line for the query and parallelism asked; a failed or timed
//! out run is reported as such (the failure's output on stderr), never as
//! a number, and does not stop the bench.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How often a running Flink child is checked for its end.
const POLL_MS: u64 = 100;

/// Whether Flink runs beside Millpond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FlinkMode {
    /// Where the machine has it: `java` and, unless the runner is built, `mvn`.
    Auto,
    /// Always; an error where the machine lacks it.
    On,
    /// Never.
    Off,
}

/// How one Flink run ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FlinkRun {
    /// Flink's net job run time (deployment to the end, final checkpoint
    /// included), seconds.
    Done { job_seconds: f64 },
    /// It ran out of time.
    Timeout,
    /// It failed (said on stderr).
    Failed,
}

/// The Flink side of the bench: the script's directory and the millpond
/// binary that dumps the topics.
pub(crate) struct Flink {
    dir: PathBuf,
    millpond: PathBuf,
    timeout: Duration,
}

/// The Nexmark runner's jar (`benches/flink`).
pub(crate) const NEXMARK_JAR: &str = "nexmark-flink.jar";
/// The Kafka pipeline's runner's jar (`benches/kafka/flink`).
pub(crate) const KAFKA_JAR: &str = "kafka-flink.jar";

impl Flink {
    /// `None` when `mode` says not to run Flink, or when it is `Auto` and
    /// the machine lacks what the script in `dir` needs to run (or build)
    /// its runner `jar` (said on stderr).
    pub(crate) fn detect(mode: FlinkMode, dir: &Path, jar: &str, timeout_s: u64) -> Result<Option<Self>> {
        if mode == FlinkMode::Off {
            return Ok(None);
        }
        let missing = missing_tools(dir, jar);
        match (missing, mode) {
            (None, _) => {
                let millpond = std::env::current_exe().context("locating the millpond binary")?;
                Ok(Some(Self { dir: dir.to_owned(), millpond, timeout: Duration::from_secs(timeout_s) }))
            }
            (Some(why), FlinkMode::On) => bail!("--flink on: {why}"),
            (Some(why), _) => {
                eprintln!("Flink is not run beside Millpond: {why}");
                Ok(None)
            }
        }
    }

    /// Whether the script has a translation of the query `name`.
    pub(crate) fn has_query(&self, name: &str) -> bool {
        self.dir.join("queries").join(format!("{name}.sql")).is_file()
    }

    /// Runs query `name` over the Millpond data directory `input` with
    /// `parallelism` slots.
    pub(crate) fn run(&self, input: &Path, name: &str, parallelism: usize) -> Result<FlinkRun> {
        let slots = parallelism.to_string();
        let args = [self.millpond.as_os_str(), input.as_os_str(), slots.as_ref(), name.as_ref()];
        let what = format!("Flink {name} with parallelism {parallelism}");
        self.script(&args, &what, |stdout| parse_result(stdout, name, parallelism))
    }

    /// Runs bid_stats from the Kafka topic `input` (`events` bids) to the
    /// topic `sink` on the cluster `brokers`, with parallelism 1.
    pub(crate) fn run_kafka(&self, brokers: &str, input: &str, sink: &str, events: u64) -> Result<FlinkRun> {
        let events = events.to_string();
        let args = [brokers, input, sink, &events, "1"].map(std::ffi::OsStr::new);
        self.script(&args, "Flink's Kafka pipeline", parse_kafka_result)
    }

    /// Runs `DIR/run.sh ARGS` and parses its output with `parse` (on success).
    fn script(&self, args: &[&std::ffi::OsStr], what: &str, parse: impl Fn(&str) -> Result<f64>) -> Result<FlinkRun> {
        let started = Instant::now();
        let script = self.dir.join("run.sh");
        let mut child = Command::new("bash")
            .arg(&script)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", script.display()))?;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if started.elapsed() > self.timeout {
                // The group holds bash and its java child.
                Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status().ok();
                child.wait().ok();
                return Ok(FlinkRun::Timeout);
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        };
        let output = child.wait_with_output()?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let parsed = if status.success() { parse(&stdout) } else { Err(anyhow::anyhow!("{status}")) };
        match parsed {
            Ok(job_seconds) => Ok(FlinkRun::Done { job_seconds }),
            Err(e) => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                eprintln!("{what} failed ({e}): {stdout}{stderr}");
                Ok(FlinkRun::Failed)
            }
        }
    }
}

/// What the machine lacks for the script, if anything.
fn missing_tools(dir: &Path, jar: &str) -> Option<String> {
    if !dir.join("run.sh").is_file() {
        return Some(format!("no {}", dir.join("run.sh").display()));
    }
    if !runs(Command::new(std::env::var_os("JAVA").unwrap_or_else(|| "java".into())).arg("-version")) {
        return Some("no java on PATH (or $JAVA)".to_owned());
    }
    let built = dir.join("target").join(jar);
    if !built.is_file() && !runs(Command::new("mvn").arg("-v")) {
        return Some(format!("{} is not built and there is no mvn on PATH", built.display()));
    }
    None
}

fn runs(command: &mut Command) -> bool {
    command.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// The job time of the script's line for `name` at `parallelism`: its
/// columns are query, parallelism, seconds, events/s/core, and more.
fn parse_result(stdout: &str, name: &str, parallelism: usize) -> Result<f64> {
    let line = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && f[0] == name && f[1] == parallelism.to_string())
        .with_context(|| format!("no result line for Flink {name} with parallelism {parallelism} in: {stdout}"))?;
    let number = |i: usize| -> Result<f64> {
        let value: f64 = line[i].parse().with_context(|| format!("Flink {name}: column {i} is {:?}", line[i]))?;
        if !(value.is_finite() && value > 0.0) {
            bail!("Flink {name}: column {i} is {value}, not a positive time");
        }
        Ok(value)
    };
    number(2)
}

/// The job time of `benches/kafka/flink/run.sh`'s `RESULT ... seconds=S ...` line.
fn parse_kafka_result(stdout: &str) -> Result<f64> {
    let line =
        stdout.lines().find(|l| l.starts_with("RESULT ")).with_context(|| format!("no RESULT line in: {stdout}"))?;
    let seconds = line
        .split_whitespace()
        .find_map(|field| field.strip_prefix("seconds="))
        .with_context(|| format!("no seconds= in {line:?}"))?;
    let value: f64 = seconds.parse().with_context(|| format!("seconds={seconds:?} in {line:?}"))?;
    if !(value.is_finite() && value > 0.0) {
        bail!("seconds={value} in {line:?} is not a positive time");
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "Flink 2.3.0 over 1000000 events (/tmp/x), RocksDB state\n\
        query parallelism seconds events/s/core startup_s process_s process_ev/s/core checkpoints cpu_used events/cpu_s others steal\n\
        q4 1 15.31 65325 4.1 21.30 46941 14 1.75 26000 0.00 0.00\n";

    #[test]
    fn a_result_line_gives_the_job_seconds() {
        assert_eq!(parse_result(OUTPUT, "q4", 1).unwrap(), 15.31);
    }

    #[test]
    fn another_query_or_parallelism_is_no_result() {
        assert!(parse_result(OUTPUT, "q4", 2).unwrap_err().to_string().contains("no result line"));
        assert!(parse_result(OUTPUT, "q5", 1).is_err());
        let bad = OUTPUT.replace("15.31", "nan");
        assert!(parse_result(&bad, "q4", 1).unwrap_err().to_string().contains("column 2"));
    }

    #[test]
    fn the_kafka_result_line_gives_the_job_seconds() {
        let output = "building\nRESULT parallelism=1 events=5000000 seconds=22.71 after_submit_seconds=21.89 \
            startup_seconds=6.95 checkpoints=21 process_seconds=29.58 cpu_used=1.67 others=0.10\n";
        assert_eq!(parse_kafka_result(output).unwrap(), 22.71);
        assert!(parse_kafka_result("RESULT parallelism=1 seconds=0.00").unwrap_err().to_string().contains("positive"));
        assert!(parse_kafka_result("no result").unwrap_err().to_string().contains("no RESULT"));
        assert!(parse_kafka_result("RESULT parallelism=1").unwrap_err().to_string().contains("no seconds="));
    }
}
