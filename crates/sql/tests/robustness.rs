//! Malformed input never takes the process down: random and mutated SQL
//! gets an error that names a line and column, and random record bytes fail
//! to decode with a message (the record goes to the dead-letter topic).
use millpond_sql::{Error, Session};
use proptest::prelude::*;

const SEED_SQL: &str = "CREATE TABLE t (a INT PRIMARY KEY, b TEXT, c DECIMAL(10,2));\n\
    INSERT INTO t VALUES (1, 'x', 1.5), (2, NULL, NULL);\n\
    CREATE MATERIALIZED VIEW v AS SELECT b, COUNT(*) AS n, SUM(c) AS s FROM t WHERE a > 0 GROUP BY b HAVING COUNT(*) > 0;\n\
    CREATE SOURCE s (k INT, at TIMESTAMP) FROM TOPIC 'st' FORMAT JSON;\n\
    CREATE MATERIALIZED VIEW w AS SELECT * FROM TUMBLE(s, at, INTERVAL '10' SECOND);";

fn check(session: &mut Session, sql: &str) {
    // A position may be just past the last newline (an unexpected end of input).
    let lines = sql.matches('\n').count() as u64 + 1;
    match session.execute(sql, Some("fuzz.sql"), false) {
        Ok(_) => {}
        Err(Error::Sql { location, message }) => {
            assert!(!message.is_empty());
            assert!(location.line >= 1 && location.line <= lines, "line {} of {lines}: {message}", location.line);
            assert!(location.column >= 1, "{message}");
            let rendered = Error::Sql { location, message }.render(sql);
            assert!(rendered.starts_with("error: "));
        }
        Err(other) => panic!("a statement failed without a location: {other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn mutated_sql_fails_with_a_location(cut in 0usize..400, insert in "[ -~\n]{0,6}", drop_len in 0usize..8) {
        let dir = tempfile::tempdir().unwrap();
        let mut session = Session::open(dir.path()).unwrap();
        let mut chars: Vec<char> = SEED_SQL.chars().collect();
        let at = cut.min(chars.len());
        let end = (at + drop_len).min(chars.len());
        chars.splice(at..end, insert.chars());
        let sql: String = chars.into_iter().collect();
        check(&mut session, &sql);
    }

    #[test]
    fn random_text_fails_with_a_location(sql in "[ -~\n]{0,80}") {
        let dir = tempfile::tempdir().unwrap();
        let mut session = Session::open(dir.path()).unwrap();
        check(&mut session, &sql);
    }
}

#[test]
fn a_failing_batch_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::open(dir.path()).unwrap();
    let error = session
        .execute(
            "CREATE TABLE t (a INT);\nINSERT INTO t VALUES (1);\nCREATE VIEW v AS SELECT nope FROM t;",
            None,
            false,
        )
        .unwrap_err();
    assert!(error.to_string().starts_with("3:25: unknown column \"nope\""), "{error}");
    assert!(session.objects().is_empty(), "nothing of a failed batch is applied");
    drop(session);
    let session = Session::open(dir.path()).unwrap();
    assert!(session.objects().is_empty(), "nothing of a failed batch reached the catalog topic");
}

#[test]
fn a_table_refuses_infinite_and_nan_doubles() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::open(dir.path()).unwrap();
    session
        .execute("CREATE TABLE t (k INT PRIMARY KEY, x DOUBLE); INSERT INTO t VALUES (1, 1.5);", None, false)
        .unwrap();
    // Stored as JSON they would read back as NULL (were the strings "inf" and "NaN", which did not read back).
    for value in ["CAST('inf' AS DOUBLE)", "CAST('-inf' AS DOUBLE)", "CAST('NaN' AS DOUBLE)"] {
        let error = session.execute(&format!("INSERT INTO t VALUES (2, {value})"), None, false).unwrap_err();
        assert!(error.to_string().contains("column \"x\" cannot store"), "{error}");
        let error = session.execute(&format!("UPDATE t SET x = {value}"), None, false).unwrap_err();
        assert!(error.to_string().contains("column \"x\" cannot store"), "{error}");
    }
    let tags = session.execute("UPDATE t SET x = x * 2", None, false).unwrap();
    assert_eq!(tags[0].tag, "UPDATE 1");
}
