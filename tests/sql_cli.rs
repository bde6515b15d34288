//! `millpond run`, `millpond sql`, `view read` and `subscribe` on SQL views,
//! end to end through the binary: rows are JSON objects keyed by column
//! name in SELECT order, statements take effect at the next run, and bad
//! SQL is an error naming file:line:column that changes nothing.
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn millpond(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_millpond")).arg("--data-dir").arg(dir).args(args).output().unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let output = millpond(dir, args);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// `millpond produce TOPIC` with `input` on stdin; it must succeed.
fn produce(dir: &Path, topic: &str, input: &str) {
    let output = Command::new(env!("CARGO_BIN_EXE_millpond"))
        .arg("--data-dir")
        .arg(dir)
        .args(["produce", topic])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(input.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(output.status.success(), "produce {topic}: {}", String::from_utf8_lossy(&output.stderr));
}

fn lines(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

const FILE: &str = "\
CREATE TABLE item (id INT PRIMARY KEY, name TEXT);
INSERT INTO item VALUES (1, 'apple'), (2, 'pear');
CREATE TABLE sale (item INT, amount DECIMAL(10, 2));
INSERT INTO sale VALUES (1, 2.50), (1, 1.25), (2, 4);
CREATE MATERIALIZED VIEW totals AS
    SELECT i.name, COUNT(*) AS sales, SUM(s.amount) AS total
    FROM sale s JOIN item i ON s.item = i.id
    GROUP BY i.name;
";

#[test]
fn sql_views_read_subscribe_and_change() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let file = dir.join("shop.sql");
    std::fs::write(&file, FILE).unwrap();
    let file = file.to_str().unwrap();
    ok(dir, &["run", file, "--until-caught-up", "--epoch-ms", "50"]);

    // Columns in SELECT order (not sorted), DECIMAL as a string.
    let read = ok(dir, &["view", "read", "totals"]);
    let first = read.lines().next().unwrap();
    assert!(first.starts_with("{\"name\":"), "columns in SELECT order: {first}");
    let mut rows = lines(&read);
    rows.sort_by_key(|r| r["name"].as_str().unwrap().to_owned());
    assert_eq!(
        rows,
        [json!({"name": "apple", "sales": 2, "total": "3.75"}), json!({"name": "pear", "sales": 1, "total": "4"})]
    );

    // A statement from the command line reaches the view at the next run;
    // running the file again applies its INSERTs no second time.
    assert!(ok(dir, &["sql", "UPDATE sale SET amount = amount * 2 WHERE item = 2"]).is_empty());
    ok(dir, &["run", file, "--until-caught-up", "--epoch-ms", "50"]);
    let mut rows = lines(&ok(dir, &["view", "read", "totals"]));
    rows.sort_by_key(|r| r["name"].as_str().unwrap().to_owned());
    assert_eq!(
        rows,
        [json!({"name": "apple", "sales": 2, "total": "3.75"}), json!({"name": "pear", "sales": 1, "total": "8"})]
    );

    // A subscriber from the first epoch: its snapshot, then the changes of
    // the next epoch (which exists: the second run committed it), rows keyed
    // by column name in order.
    let events = lines(&ok(dir, &["subscribe", "totals", "--as-of", "1", "--max-epochs", "1", "--progress"]));
    let rows: Vec<&Value> = events.iter().filter_map(|e| e.get("row")).collect();
    assert!(!rows.is_empty(), "{events:?}");
    assert!(rows.iter().all(|r| r.as_object().unwrap().keys().collect::<Vec<_>>() == ["name", "sales", "total"]));
    assert_eq!(events.last().unwrap()["progress"], true, "{events:?}");

    // Bad SQL: an error naming where, and nothing applied.
    let output = millpond(dir, &["sql", "INSERT INTO item VALUES (3, 'fig');\nDELETE FROM item WHERE nmae = 'apple'"]);
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("2:24") && error.contains("did you mean \"name\"?"), "{error}");
    ok(dir, &["run", file, "--until-caught-up", "--epoch-ms", "50"]);
    assert_eq!(lines(&ok(dir, &["view", "read", "totals"])).len(), 2, "the failed batch inserted nothing");
}

#[test]
fn a_row_held_twice_prints_twice_and_no_column_name_collides_with_ours() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let file = dir.join("bag.sql");
    std::fs::write(
        &file,
        "CREATE TABLE t (a INT, _multiplicity INT, count INT, row TEXT);
         INSERT INTO t VALUES (1, 5, 7, 'r'), (1, 5, 7, 'r'), (2, 1, 1, 's');
         CREATE MATERIALIZED VIEW bag AS SELECT a, _multiplicity, count, row FROM t;",
    )
    .unwrap();
    ok(dir, &["run", file.to_str().unwrap(), "--until-caught-up", "--epoch-ms", "50"]);
    let held = json!({"a": 1, "_multiplicity": 5, "count": 7, "row": "r"});
    let once = json!({"a": 2, "_multiplicity": 1, "count": 1, "row": "s"});
    assert_eq!(lines(&ok(dir, &["view", "read", "bag"])), [held.clone(), held.clone(), once.clone()]);
    assert_eq!(
        lines(&ok(dir, &["view", "read", "bag", "--counts"])),
        [json!({"row": held, "count": 2}), json!({"row": once, "count": 1})]
    );
}

#[test]
fn the_readme_sql_example_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sql/bid_stats.sql");
    ok(dir, &["gen", "nexmark", "--events", "20000"]);
    ok(dir, &["run", example, "--until-caught-up", "--epoch-ms", "50"]);
    let stats = lines(&ok(dir, &["view", "read", "bid_stats"]));
    assert!(stats.len() > 10, "{stats:?}");
    let bids: i64 = stats.iter().map(|r| r["bids"].as_i64().unwrap()).sum();
    assert!(bids > 10_000, "most of 20 000 events are bids: {bids}");
    ok(dir, &["sql", "INSERT INTO watched VALUES (1001, 'another')"]);
    ok(dir, &["run", example, "--until-caught-up", "--epoch-ms", "50"]);
    let watched = lines(&ok(dir, &["view", "read", "watched_stats"]));
    let auctions: Vec<i64> = watched.iter().map(|r| r["auction"].as_i64().unwrap()).collect();
    assert_eq!(auctions, [1000, 1001], "the file's INSERT once, the statement's once: {watched:?}");
}

/// Waits until `dir` has a published checkpoint at or after `epoch`.
fn wait_for_epoch(dir: &Path, epoch: u64) -> u64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let published = std::fs::read(dir.join("checkpoint.json"))
            .ok()
            .and_then(|t| serde_json::from_slice::<Value>(&t).ok())
            .and_then(|m| m["epoch"].as_u64());
        if let Some(e) = published.filter(|e| *e >= epoch) {
            return e;
        }
        assert!(std::time::Instant::now() < deadline, "no checkpoint at epoch {epoch} within a minute");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn millpond_command(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_millpond"));
    command.arg("--data-dir").arg(dir);
    command
}

#[test]
fn sigterm_and_sigint_stop_run_cleanly_at_a_commit() {
    for signal in ["-TERM", "-INT"] {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let file = dir.join("shop.sql");
        std::fs::write(&file, FILE).unwrap();
        let child = millpond_command(dir)
            .args(["run", file.to_str().unwrap(), "--epoch-ms", "20"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_epoch(dir, 1);
        let status = Command::new("kill").arg(signal).arg(child.id().to_string()).status().unwrap();
        assert!(status.success());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{signal}: a clean stop exits 0: {stderr}");
        assert!(stderr.contains("epochs") && stderr.contains("committed"), "{signal}: it reports the run: {stderr}");
        assert!(dir.join("clean-shutdown").exists(), "{signal}: the log was closed cleanly");
        let rows = lines(&ok(dir, &["view", "read", "totals"]));
        assert_eq!(rows.len(), 2, "{signal}: {rows:?}");
    }
}

#[test]
fn a_view_replaced_under_a_live_subscriber_is_followed_with_retractions() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let file = dir.join("shop.sql");
    std::fs::write(&file, FILE).unwrap();
    let file = file.to_str().unwrap();
    ok(dir, &["run", file, "--until-caught-up", "--epoch-ms", "50"]);
    let mut subscriber = millpond_command(dir)
        .args(["subscribe", "totals", "--progress"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (sender, events) = std::sync::mpsc::channel::<Value>();
    let stdout = subscriber.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if sender.send(serde_json::from_str(&line).unwrap()).is_err() {
                return;
            }
        }
    });
    let mut held: std::collections::BTreeMap<String, i64> = Default::default();
    let fold_until = |want: &[Value], held: &mut std::collections::BTreeMap<String, i64>| {
        let want: std::collections::BTreeMap<String, i64> = want.iter().map(|r| (r.to_string(), 1)).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let Ok(event) = events.recv_timeout(std::time::Duration::from_millis(100)) else { continue };
            if let Some(row) = event.get("row") {
                let count = held.entry(row.to_string()).or_insert(0);
                *count += event["diff"].as_i64().unwrap();
                if *count == 0 {
                    held.remove(&row.to_string());
                }
            } else if *held == want {
                return;
            }
        }
        panic!("the subscriber holds {held:?}, not {want:?}");
    };
    fold_until(
        &[json!({"name": "apple", "sales": 2, "total": "3.75"}), json!({"name": "pear", "sales": 1, "total": "4"})],
        &mut held,
    );
    ok(
        dir,
        &[
            "sql",
            "CREATE OR REPLACE MATERIALIZED VIEW totals AS \
             SELECT i.name, COUNT(*) AS sales, MAX(s.amount) AS total \
             FROM sale s JOIN item i ON s.item = i.id GROUP BY i.name",
        ],
    );
    // Any run maintains the catalog's views: an empty file will do.
    let empty = dir.join("empty.sql");
    std::fs::write(&empty, "").unwrap();
    ok(dir, &["run", empty.to_str().unwrap(), "--until-caught-up", "--epoch-ms", "50"]);
    fold_until(
        &[json!({"name": "apple", "sales": 2, "total": "2.5"}), json!({"name": "pear", "sales": 1, "total": "4"})],
        &mut held,
    );
    assert_eq!(lines(&ok(dir, &["view", "read", "totals"])).len(), 2);
    subscriber.kill().unwrap();
    subscriber.wait().unwrap();
}

#[test]
fn a_view_dropped_by_a_statement_is_not_served_before_a_job_applies_the_drop() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let file = dir.join("shop.sql");
    std::fs::write(&file, FILE).unwrap();
    ok(dir, &["run", file.to_str().unwrap(), "--until-caught-up", "--epoch-ms", "50"]);
    assert!(ok(dir, &["view", "list"]).contains("totals"));
    ok(dir, &["sql", "DROP MATERIALIZED VIEW totals"]);
    assert!(!ok(dir, &["view", "list"]).contains("totals"), "view list omits it");
    assert!(!ok(dir, &["view", "list", "--json"]).contains("totals"));
    for args in [&["view", "read", "totals"][..], &["subscribe", "totals", "--max-epochs", "1"][..]] {
        let output = millpond(dir, args);
        assert!(!output.status.success(), "{args:?} serves a dropped view");
        let error = String::from_utf8_lossy(&output.stderr);
        assert!(error.contains("view 'totals' was dropped"), "{args:?}: {error}");
    }
}

#[test]
fn a_topic_that_a_source_or_job_reads_is_not_deleted_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let file = dir.join("src.sql");
    std::fs::write(
        &file,
        "CREATE SOURCE ev (k BIGINT) FROM TOPIC 'ev' FORMAT JSON;
         CREATE MATERIALIZED VIEW c AS SELECT k, COUNT(*) AS n FROM ev GROUP BY k;",
    )
    .unwrap();
    ok(dir, &["topic", "create", "ev"]);
    produce(dir, "ev", "{\"k\":1}\n{\"k\":2}\n");
    ok(dir, &["run", file.to_str().unwrap(), "--until-caught-up", "--epoch-ms", "50"]);

    let output = millpond(dir, &["topic", "delete", "ev"]);
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("topic 'ev' is read by the committed reader(s)") && error.contains("--force"), "{error}");
    assert!(ok(dir, &["topic", "list"]).contains("ev"), "nothing was deleted");

    // Forced: the job then refuses to resume at the old incarnation's offsets.
    ok(dir, &["topic", "delete", "ev", "--force"]);
    let output = millpond(dir, &["run", file.to_str().unwrap(), "--until-caught-up", "--epoch-ms", "50"]);
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("deleted and created again"), "{error}");
}

#[test]
fn a_garbled_checkpoint_json_is_rebuilt_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let file = dir.join("shop.sql");
    std::fs::write(&file, FILE).unwrap();
    let file = file.to_str().unwrap();
    ok(dir, &["run", file, "--until-caught-up", "--epoch-ms", "50"]);
    let before = lines(&ok(dir, &["view", "read", "totals"]));
    // The readers' copy is damaged; the store's checkpoint is intact.
    std::fs::write(dir.join("checkpoint.json"), b"{\"version\": 4, \"epo").unwrap();
    let output = millpond(dir, &["view", "read", "totals"]);
    assert!(!output.status.success(), "a reader refuses a garbled copy");
    assert!(String::from_utf8_lossy(&output.stderr).contains("checkpoint.json"));
    ok(dir, &["run", file, "--until-caught-up", "--epoch-ms", "50"]);
    assert_eq!(lines(&ok(dir, &["view", "read", "totals"])), before, "the run republished it from the store");
}

#[test]
fn a_sources_dead_letters_are_the_records_as_they_were_with_headers() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "readings", "--partitions", "1"]);
    let bad = r#"{"sensor": "s1", "value": "high"}"#;
    let input = format!("{{\"sensor\": \"s1\", \"value\": 1}}\n{bad}\n");
    produce(dir, "readings", &input);
    let file = dir.join("sensors.sql");
    std::fs::write(
        &file,
        "CREATE SOURCE sensors (sensor TEXT, value BIGINT) FROM TOPIC 'readings' FORMAT JSON;\n\
         CREATE MATERIALIZED VIEW names AS SELECT DISTINCT sensor FROM sensors;\n\
         CREATE MATERIALIZED VIEW peaks AS SELECT sensor, MAX(value) AS peak FROM sensors GROUP BY sensor;\n",
    )
    .unwrap();
    let run = millpond(dir, &["run", file.to_str().unwrap(), "--until-caught-up", "--epoch-ms", "50"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("1 dead letters"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // The value as it was produced, not escaped into another JSON document.
    assert_eq!(ok(dir, &["consume", "sensors.dead-letter", "--format", "raw"]), format!("{bad}\n"));
    let letter = &lines(&ok(dir, &["consume", "sensors.dead-letter"]))[0];
    assert_eq!(letter["value"], bad);
    let headers = &letter["headers"];
    assert_eq!(headers["millpond.source.topic"], "readings");
    assert_eq!(
        (headers["millpond.source.partition"].as_str(), headers["millpond.source.offset"].as_str()),
        (Some("0"), Some("1"))
    );
    let error = headers["millpond.error"].as_str().unwrap();
    assert!(error.contains("column \"value\": expected BIGINT, found string \"high\""), "{error}");
    // Both views left the record out, though only one reads `value`.
    assert_eq!(lines(&ok(dir, &["view", "read", "names"])), [json!({"sensor": "s1"})]);
    assert_eq!(lines(&ok(dir, &["view", "read", "peaks"])), [json!({"sensor": "s1", "peak": 1})]);
}

/// Runs psql against a server; returns (success, stdout, stderr).
fn psql(port: u16, sql: &str) -> (bool, String, String) {
    let output = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "millpond", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
        .args(["-c", sql])
        .output()
        .expect("psql runs (the machine needs postgresql-client; .ci/run installs it)");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn millpond_serve_answers_psql_while_it_maintains_views_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let file = dir.join("shop.sql");
    std::fs::write(&file, FILE).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_millpond"))
        .arg("--data-dir")
        .arg(dir)
        .args(["serve", "--pg-listen", "127.0.0.1:0", "--epoch-ms", "50"])
        .arg(&file)
        // Not the harness's stdout: a failed test must not leave it open.
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let address = dir.join("server.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let port: u16 = loop {
        if let Ok(text) = std::fs::read_to_string(&address)
            && let Ok(record) = serde_json::from_str::<Value>(&text)
        {
            break record["pg"].as_str().unwrap().rsplit(':').next().unwrap().parse().unwrap();
        }
        assert!(std::time::Instant::now() < deadline, "the server never wrote its address");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // The file's view, read over the wire once it has committed.
    let (ok, out, err) = psql(port, "SELECT * FROM totals");
    assert!(ok, "{err}");
    let mut rows: Vec<&str> = out.lines().collect();
    rows.sort();
    // SUM of a DECIMAL(10, 2) prints at its scale, as in Postgres.
    assert_eq!(rows, ["apple|2|3.75", "pear|1|4.00"]);
    // A statement while the view runs (was: refused on the directory's lock).
    let (ok, out, err) = psql(port, "INSERT INTO sale VALUES (2, 1)");
    assert!(ok && out.contains("INSERT 0 1"), "{out} {err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, out, _) = psql(port, "SELECT * FROM totals");
        if out.lines().any(|l| l == "pear|2|5.00") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the INSERT never reached the view: {out}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (ok, out, err) = psql(port, "SELECT name FROM totals ORDER BY name");
    assert!(ok && out == "apple\npear\n", "a one-off query: {out} {err}");
    // `millpond sql` goes through the running server (it holds the lock).
    let sql = |statement: &str| {
        Command::new(env!("CARGO_BIN_EXE_millpond"))
            .arg("--data-dir")
            .arg(dir)
            .args(["sql", statement])
            .output()
            .unwrap()
    };
    let inserted = sql("INSERT INTO sale VALUES (1, 1)");
    let stderr = String::from_utf8_lossy(&inserted.stderr);
    assert!(inserted.status.success() && stderr.contains("INSERT 0 1"), "{stderr}");
    let selected = sql("SELECT name, sales FROM totals WHERE name = 'pear'; SHOW TABLES");
    assert!(selected.status.success(), "{}", String::from_utf8_lossy(&selected.stderr));
    assert_eq!(String::from_utf8_lossy(&selected.stdout), "pear\t2\nitem\nsale\n");
    let refused = sql("SELECT nope FROM totals");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("SQLSTATE 42703"), "{stderr}");
    // `millpond produce` too: stdin goes to the server as COPY FROM STDIN.
    let created = sql("CREATE SOURCE clicks (page TEXT) FROM TOPIC 'clicks' FORMAT JSON;\n\
         CREATE MATERIALIZED VIEW per_page AS SELECT page, COUNT(*) AS n FROM clicks GROUP BY page");
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let mut produce = Command::new(env!("CARGO_BIN_EXE_millpond"))
        .arg("--data-dir")
        .arg(dir)
        .args(["produce", "clicks", "--key-field", "page"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = (0..3000).map(|i| format!("{{\"page\":\"p{}\"}}\n", i % 3)).collect();
    produce.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let produced = produce.wait_with_output().unwrap();
    assert!(produced.status.success(), "{}", String::from_utf8_lossy(&produced.stderr));
    assert!(
        String::from_utf8_lossy(&produced.stdout).starts_with("produced 3000 records to 'clicks' (through the server")
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (ok, out, _) = psql(port, "SELECT page, n FROM per_page ORDER BY page");
        if ok && out == "p0|1000\np1|1000\np2|1000\n" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the produced records never reached the view: {out}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let refused = Command::new(env!("CARGO_BIN_EXE_millpond"))
        .arg("--data-dir")
        .arg(dir)
        .args(["produce", "view.per_page"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("SQLSTATE 42501"), "{stderr}");
    // `consume` too: the records come through the server (COPY topic TO STDOUT).
    let consume = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_millpond"))
            .arg("--data-dir")
            .arg(dir)
            .arg("consume")
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "consume {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        lines(&String::from_utf8_lossy(&output.stdout))
    };
    let all = consume(&["clicks"]);
    assert_eq!(all.len(), 3000);
    let values: Vec<String> = all.iter().map(|r| r["value"].as_str().unwrap().to_owned()).collect();
    let mut sorted = values.clone();
    sorted.sort();
    let mut expected: Vec<String> = input.lines().map(str::to_owned).collect();
    expected.sort();
    assert_eq!(sorted, expected, "every produced record, once");
    assert_eq!(consume(&["clicks", "--max", "5"]).len(), 5);
    // A group through the server: what one run printed, the next does not.
    let first = consume(&["clicks", "--group", "g", "--max", "1000"]);
    let rest = consume(&["clicks", "--group", "g"]);
    assert_eq!((first.len(), rest.len()), (1000, 2000));
    let position = |r: &Value| (r["partition"].as_u64().unwrap(), r["offset"].as_u64().unwrap());
    let mut seen: Vec<(u64, u64)> = first.iter().chain(&rest).map(position).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3000, "the two runs together read each record once");
    assert!(consume(&["clicks", "--group", "g"]).is_empty(), "nothing left for the group");
    // A bad request names what is wrong, with its SQLSTATE.
    let refused = Command::new(env!("CARGO_BIN_EXE_millpond"))
        .arg("--data-dir")
        .arg(dir)
        .args(["consume", "nope"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("SQLSTATE 42P01") && stderr.contains("nope"), "{stderr}");
    // A changelog is read up to what the runtime has committed, never its tail.
    let changes = consume(&["view.per_page"]);
    let checkpoint: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("checkpoint.json")).unwrap()).unwrap();
    let committed = checkpoint["sinks"]["view.per_page"].as_u64().unwrap();
    assert!(!changes.is_empty() && changes.iter().all(|r| r["offset"].as_u64().unwrap() < committed));
    // --follow prints records as they are produced.
    let mut follower = Command::new(env!("CARGO_BIN_EXE_millpond"))
        .arg("--data-dir")
        .arg(dir)
        .args(["consume", "clicks", "--offset", "end", "--follow", "--format", "raw"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500)); // it starts at the end as it is now
    let mut produce = Command::new(env!("CARGO_BIN_EXE_millpond"))
        .arg("--data-dir")
        .arg(dir)
        .args(["produce", "clicks"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    produce.stdin.take().unwrap().write_all(b"{\"page\":\"late\"}\n").unwrap();
    assert!(produce.wait().unwrap().success());
    let mut followed = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(follower.stdout.take().unwrap()), &mut followed).unwrap();
    assert_eq!(followed, "{\"page\":\"late\"}\n");
    follower.kill().unwrap();
    follower.wait().unwrap();
    // The parameters drivers check at startup.
    let (ok, out, err) = psql(port, "\\echo :SERVER_VERSION_NAME :SERVER_VERSION_NUM");
    assert!(ok && out.starts_with("15.0 (Millpond ") && out.trim_end().ends_with(" 150000"), "{out} {err}");
    // SIGTERM: a clean stop, the address file gone, the data directory free again.
    let pid = server.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = server.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!address.exists());
    let mut rows = lines(&ok_read(dir));
    rows.sort_by_key(|r| r["name"].as_str().unwrap().to_owned());
    assert_eq!(rows[1], json!({"name": "pear", "sales": 2, "total": "5"}));
    // The group's acknowledgements are the log's committed offsets: the
    // local path, without the server, starts after them (at the late record).
    let late = lines(&self::ok(dir, &["consume", "clicks", "--group", "g"]));
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(late[0]["value"], "{\"page\":\"late\"}");
}

fn ok_read(dir: &Path) -> String {
    ok(dir, &["view", "read", "totals"])
}
