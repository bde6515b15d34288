//! Once-per-file DML markers: whose they are, and what a bad one does.
use millpond_dataflow::{TopicRecord, Topics};
use millpond_sql::{CATALOG_TOPIC, Error, Session};

const FILE: &str = "CREATE TABLE t (k INT PRIMARY KEY, v TEXT);\nINSERT INTO t VALUES (1, 'one'), (2, 'two');";

fn tags(session: &mut Session, sql: &str, file: Option<&str>, once: bool) -> Vec<String> {
    session.execute(sql, file, once).unwrap().into_iter().map(|o| o.tag).collect()
}

/// The number of rows of `t` (an UPDATE that changes nothing counts them).
fn rows(session: &mut Session) -> String {
    tags(session, "UPDATE t SET v = v", None, false).remove(0)
}

#[test]
fn a_table_created_again_takes_the_files_inserts_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::open(dir.path()).unwrap();
    assert_eq!(tags(&mut session, FILE, Some("a.sql"), true), ["CREATE TABLE t", "INSERT 2"]);
    assert_eq!(
        tags(&mut session, FILE, Some("a.sql"), true),
        ["CREATE TABLE t (unchanged)", "INSERT (already applied)"]
    );
    assert_eq!(tags(&mut session, "DROP TABLE t CASCADE", None, false), ["DROP TABLE t"]);
    // Was: "INSERT (already applied)", and the table stayed empty.
    assert_eq!(tags(&mut session, FILE, Some("a.sql"), true), ["CREATE TABLE t", "INSERT 2"]);
    assert_eq!(rows(&mut session), "UPDATE 2");
    drop(session);
    let mut session = Session::open(dir.path()).unwrap();
    assert_eq!(
        tags(&mut session, FILE, Some("a.sql"), true),
        ["CREATE TABLE t (unchanged)", "INSERT (already applied)"]
    );
    assert_eq!(rows(&mut session), "UPDATE 2");
}

#[test]
fn a_file_that_drops_and_creates_its_table_inserts_at_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::open(dir.path()).unwrap();
    let file = format!("DROP TABLE IF EXISTS t;\n{FILE}");
    for _ in 0..3 {
        let tags = tags(&mut session, &file, Some("a.sql"), true);
        assert_eq!(tags[2], "INSERT 2", "{tags:?}");
        assert_eq!(rows(&mut session), "UPDATE 2");
    }
}

#[test]
fn the_same_statement_in_two_files_applies_once_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::open(dir.path()).unwrap();
    tags(&mut session, "CREATE TABLE t (v TEXT);", None, false);
    let insert = "INSERT INTO t VALUES ('x');";
    assert_eq!(tags(&mut session, insert, Some("a.sql"), true), ["INSERT 1"]);
    // Was: "INSERT (already applied)", the marker being the statement's text only.
    assert_eq!(tags(&mut session, insert, Some("b.sql"), true), ["INSERT 1"]);
    assert_eq!(tags(&mut session, insert, Some("a.sql"), true), ["INSERT (already applied)"]);
    assert_eq!(tags(&mut session, insert, Some("b.sql"), true), ["INSERT (already applied)"]);
    assert_eq!(rows(&mut session), "UPDATE 2");
}

/// The catalog's markers: key, offset and value.
fn markers(dir: &std::path::Path) -> Vec<(String, u64, String)> {
    let topics = Topics::open(dir).unwrap();
    let records = topics.read_all(CATALOG_TOPIC).unwrap();
    records
        .into_iter()
        .filter_map(|r| {
            let key = String::from_utf8(r.key?).ok()?;
            let value = String::from_utf8(r.value?).ok()?;
            key.starts_with("applied/").then_some((key, r.offset, value))
        })
        .collect()
}

fn put(dir: &std::path::Path, key: &str, value: &str) -> u64 {
    let topics = Topics::open(dir).unwrap();
    let offset = topics.end_offset(CATALOG_TOPIC, 0).unwrap();
    let record = TopicRecord { key: Some(key.into()), value: Some(value.into()), headers: vec![] };
    topics.append(CATALOG_TOPIC, vec![record]).unwrap();
    offset
}

#[test]
fn a_malformed_marker_is_refused_not_taken_for_a_cut_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::open(dir.path()).unwrap();
    tags(&mut session, FILE, Some("a.sql"), true);
    drop(session);
    let [(key, _, value)] = markers(dir.path()).try_into().unwrap();
    let marker: serde_json::Value = serde_json::from_str(&value).unwrap();
    assert_eq!(marker["version"], 1, "{value}");
    for bad in
        [r#"{"topic": "table.t"}"#.to_owned(), "{}".to_owned(), value.replace("\"records\":2", "\"records\":\"2\"")]
    {
        let offset = put(dir.path(), &key, &bad);
        let error = Session::open(dir.path()).unwrap_err();
        assert!(matches!(&error, Error::Catalog { offset: o, .. } if *o == offset), "{error}");
        assert!(error.to_string().contains(&key), "the error names the marker: {error}");
        // Was: the marker deleted as cut, and the INSERT applied again (duplicate rows).
        assert_eq!(markers(dir.path()).last().unwrap().2, bad, "a malformed marker is left as it is");
    }
    // A marker of a later version, or of the untyped format before versions, is refused too.
    let later = value.replace("\"version\":1", "\"version\":2");
    put(dir.path(), &key, &later);
    let error = Session::open(dir.path()).unwrap_err();
    assert!(error.to_string().contains("version 2"), "{error}");
    put(dir.path(), &key, &value);
    put(dir.path(), "applied/0123456789abcdef/1", r#"{"topic":"table.t","offset":0,"records":2}"#);
    let error = Session::open(dir.path()).unwrap_err();
    assert!(error.to_string().contains("applied/0123456789abcdef/1"), "{error}");
    // Put right, the directory opens and the INSERT stays applied.
    let topics = Topics::open(dir.path()).unwrap();
    let tombstone = TopicRecord { key: Some(b"applied/0123456789abcdef/1".to_vec()), value: None, headers: vec![] };
    topics.append(CATALOG_TOPIC, vec![tombstone]).unwrap();
    drop(topics);
    let mut session = Session::open(dir.path()).unwrap();
    assert_eq!(tags(&mut session, FILE, Some("a.sql"), true)[1], "INSERT (already applied)");
    assert_eq!(rows(&mut session), "UPDATE 2");
}

#[test]
fn a_table_created_after_a_drop_that_crashed_before_its_tombstones_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::open(dir.path()).unwrap();
    tags(&mut session, FILE, None, false);
    assert_eq!(rows(&mut session), "UPDATE 2");
    drop(session);
    // What a DROP TABLE left when it crashed after its catalog record and
    // before its rows' tombstones, in directories written when the catalog
    // went first (before committed ends): the table gone, its rows still in
    // its topic. (Rows of a table whose batch never committed look the same.)
    let topics = Topics::open(dir.path()).unwrap();
    topics.append(CATALOG_TOPIC, vec![TopicRecord { key: Some(b"t".to_vec()), value: None, headers: vec![] }]).unwrap();
    drop(topics);
    let mut session = Session::open(dir.path()).unwrap();
    assert!(session.objects().is_empty());
    // Created again (its column `v` of another type, which the old rows do not fit): empty.
    let created = tags(&mut session, "CREATE TABLE t (k INT PRIMARY KEY, v BOOLEAN, w BOOLEAN)", None, false);
    assert_eq!(created, ["CREATE TABLE t"]);
    assert_eq!(
        tags(&mut session, "UPDATE t SET w = w", None, false),
        ["UPDATE 0"],
        "the old rows are not the new table's"
    );
    drop(session);
    // And it stays empty when read back from the log.
    let mut session = Session::open(dir.path()).unwrap();
    assert_eq!(tags(&mut session, "UPDATE t SET w = w", None, false), ["UPDATE 0"]);
    assert_eq!(tags(&mut session, "INSERT INTO t VALUES (1, true, false)", None, false), ["INSERT 1"]);
    assert_eq!(tags(&mut session, "UPDATE t SET w = w", None, false), ["UPDATE 1"]);
}

#[test]
fn a_table_dropped_and_created_with_other_column_types_reads_only_its_own_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::open(dir.path()).unwrap();
    tags(&mut session, FILE, None, false);
    tags(&mut session, "DROP TABLE t", None, false);
    // `v` was TEXT: the dropped rows ('one', 'two') would not decode as BOOLEAN.
    tags(&mut session, "CREATE TABLE t (k INT PRIMARY KEY, v BOOLEAN)", None, false);
    drop(session);
    let mut session = Session::open(dir.path()).unwrap();
    assert_eq!(tags(&mut session, "UPDATE t SET v = v", None, false), ["UPDATE 0"], "was: holds a bad row");
    tags(&mut session, "INSERT INTO t VALUES (1, true)", None, false);
    assert_eq!(tags(&mut session, "UPDATE t SET v = NOT v", None, false), ["UPDATE 1"]);
}

#[test]
fn a_malformed_committed_end_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::open(dir.path()).unwrap();
    tags(&mut session, FILE, Some("a.sql"), true);
    drop(session);
    for bad in [r#"{"version":1,"topic":"table.t"}"#, r#"{"version":1,"topic":"table.u","end":2}"#, "{}"] {
        let offset = put(dir.path(), "table-end/v1/table.t", bad);
        let error = Session::open(dir.path()).unwrap_err();
        assert!(matches!(&error, Error::Catalog { offset: o, .. } if *o == offset), "{error}");
        assert!(error.to_string().contains("table-end/v1/table.t"), "the error names the record: {error}");
    }
    put(dir.path(), "table-end/v1/table.t", r#"{"version":1,"topic":"table.t","end":2}"#);
    let mut session = Session::open(dir.path()).unwrap();
    assert_eq!(rows(&mut session), "UPDATE 2");
}
