//! `millpond run`, `millpond sql`, `view read` and `subscribe` on SQL views,
//! end to end through the binary: rows are JSON objects keyed by column
//! name in SELECT order, statements take effect at the next run, and bad
//! SQL is an error naming file:line:column that changes nothing.
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn millpond(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_millpond")).arg("--data-dir").arg(dir).args(args).output().unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let output = millpond(dir, args);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
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
