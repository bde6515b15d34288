//! Long chains of operators, set operations and joins: refused with an
//! error naming where, never a stack overflow (which aborts the process).
//! Every case runs on a thread with a 2 MiB stack, the size of cargo's
//! test threads and of the dataflow's worker threads.
use millpond_dataflow::{RuntimeConfig, read_view};
use millpond_sql::{Error, Session};

const STACK: usize = 2 << 20;
/// The limit, `parse::NESTING_MAX`.
const LIMIT: usize = 500;

fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(STACK).spawn(f).expect("a thread").join().expect("no panic")
}

fn chain(term: &str, op: &str, n: usize) -> String {
    vec![term; n].join(op)
}

/// The shapes that overflowed the stack, each `n` links long.
fn shapes(n: usize) -> Vec<(&'static str, String)> {
    vec![
        ("+", chain("a", " + ", n)),
        ("AND", chain("a > 0", " AND ", n)),
        ("||", chain("t", " || ", n)),
        ("OR", chain("a > 0", " OR ", n)),
    ]
}

const SOURCE: &str = "CREATE SOURCE s (a BIGINT, t TEXT, b BOOLEAN) FROM TOPIC 's' FORMAT JSON;";

fn execute(sql: String) -> Result<(), Error> {
    on_small_stack(move || {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut session = Session::open(dir.path())?;
        session.execute(SOURCE, Some("source.sql"), true)?;
        session.execute(&sql, Some("deep.sql"), true).map(|_| ())
    })
}

fn assert_too_deep(result: Result<(), Error>, what: &str) {
    let error = result.expect_err(what);
    let text = error.to_string();
    assert!(
        matches!(error, Error::Sql { .. })
            && text.starts_with("deep.sql:")
            && text.contains(&format!("the limit is {LIMIT}")),
        "{what}: {text}"
    );
}

#[test]
fn long_expression_chains_are_refused_in_views_and_selects() {
    for (n, name) in [(3500, "+"), (10_000, "AND"), (10_000, "||"), (5000, "OR")] {
        let (_, expr) = shapes(n).into_iter().find(|(shape, _)| *shape == name).expect("a shape");
        let view = format!("CREATE MATERIALIZED VIEW v AS SELECT {expr} AS x FROM s;");
        assert_too_deep(execute(view), &format!("a view of {n} {name}"));
        let select = format!("SELECT {expr} FROM s");
        assert_too_deep(execute(select.clone()), &format!("a SELECT of {n} {name}"));
        let parsed = on_small_stack(move || millpond_sql::parse_statements(&select, Some("deep.sql")));
        assert_too_deep(parsed.map(|_| ()), &format!("parsing {n} {name}"));
    }
}

#[test]
fn long_union_chains_are_refused_in_views_and_selects() {
    let union = chain("SELECT a FROM s", " UNION ALL ", 3000);
    assert_too_deep(execute(format!("CREATE MATERIALIZED VIEW v AS {union};")), "a view of 3000 UNION ALL");
    assert_too_deep(execute(union), "a SELECT of 3000 UNION ALL");
    // Commas in the branches do not hide the chain.
    let union = chain("SELECT a, t, a + 1 FROM s", " UNION ALL ", 3000);
    assert_too_deep(execute(format!("CREATE MATERIALIZED VIEW v AS {union};")), "UNION ALL of lists");
}

#[test]
fn long_join_chains_and_comma_lists_are_refused() {
    let joins: String = (0..1000).map(|i| format!(" JOIN s AS s{i} ON s{i}.a = s.a")).collect();
    assert_too_deep(execute(format!("CREATE MATERIALIZED VIEW v AS SELECT s.a FROM s{joins};")), "1000 joins");
    let from: Vec<String> = (0..1000).map(|i| format!("s AS s{i}")).collect();
    let sql = format!("CREATE MATERIALIZED VIEW v AS SELECT 1 AS x FROM {};", from.join(", "));
    assert_too_deep(execute(sql), "1000 tables in FROM");
}

#[test]
fn the_error_names_where_the_limit_is_passed() {
    let sql = format!("SELECT\n  {} FROM s", chain("a", " + ", 600));
    let error = on_small_stack(move || millpond_sql::parse_statements(&sql, Some("deep.sql"))).unwrap_err();
    // The 501st `+` (each `a + ` is four columns, the first at column 3).
    let column = 3 + 500 * 4 + 2;
    assert_eq!(
        error.to_string(),
        format!(
            "deep.sql:2:{column}: the statement nests 599 levels deep (a chain of operators, set operations or joins \
             is one level per link, a parenthesis one more); the limit is 500: split it, e.g. into views"
        )
    );
}

#[test]
fn statements_at_the_limit_bind_run_and_drop_on_a_small_stack() {
    on_small_stack(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut session = Session::open(dir.path()).unwrap();
        let mut sql = String::from(SOURCE);
        // Each shape as deep as allowed: N - 1 operators and a parenthesis.
        let n = LIMIT;
        let shapes = [
            chain("a", " + ", n),
            chain("b", " AND ", n),
            chain("t", " || ", n),
            chain("b", " OR ", n),
            // Casts between the links (BIGINT to DECIMAL), and a lowered operator.
            format!("a{}", " + 1.5 + a".repeat((n - 1) / 2)),
            chain("b", " IS DISTINCT FROM ", n),
        ];
        for (i, expr) in shapes.into_iter().enumerate() {
            sql.push_str(&format!("CREATE MATERIALIZED VIEW v{i} AS SELECT ({expr}) AS x FROM s;"));
        }
        let union = chain("SELECT a FROM s", " UNION ALL ", n + 1);
        sql.push_str(&format!("CREATE MATERIALIZED VIEW u AS {union};"));
        sql.push_str("CREATE VIEW p AS SELECT a + a + a + a AS a FROM s;");
        // A view over a view: their depths add up.
        sql.push_str(&format!("CREATE MATERIALIZED VIEW q AS SELECT {} AS x FROM p;", chain("a", " + ", n - 3)));
        session.execute(&sql, Some("deep.sql"), true).unwrap();
        let views = session.compile().unwrap();
        drop(session);
        let producer = millpond_dataflow::Topics::open(dir.path()).unwrap();
        producer
            .append(
                "s",
                vec![millpond_dataflow::TopicRecord {
                    value: Some(br#"{"a": 1, "t": "x", "b": true}"#.to_vec()),
                    ..Default::default()
                }],
            )
            .unwrap();
        drop(producer);
        let config = RuntimeConfig::new(dir.path()).epoch_interval_ms(20).stop_when_caught_up(true);
        millpond_sql::run(config, views).unwrap();
        let rows = |view: &str| read_view(dir.path(), view).unwrap().rows;
        assert_eq!(rows("v0")[0].0["x"], serde_json::json!(n));
        assert_eq!(rows("v1")[0].0["x"], serde_json::json!(true));
        assert_eq!(rows("v2")[0].0["x"], serde_json::json!("x".repeat(n)));
        assert_eq!(rows("v3")[0].0["x"], serde_json::json!(true));
        assert_eq!(rows("v4")[0].0["x"], serde_json::json!(format!("{}", 1.0 + 2.5 * ((n - 1) / 2) as f64)));
        assert_eq!(rows("v5")[0].0["x"], serde_json::json!((n - 1).is_multiple_of(2)));
        assert_eq!(rows("u")[0].1, n as i64 + 1);
        assert_eq!(rows("q")[0].0["x"], serde_json::json!(4 * (n - 3)));
        // A view over a view adds their depths: the catalog refuses a sum past the limit.
        let mut session = Session::open(dir.path()).unwrap();
        let sql = format!("CREATE MATERIALIZED VIEW w AS SELECT {} AS x FROM v0;", chain("x", " + ", 100));
        let error = session.execute(&sql, Some("deep.sql"), true).unwrap_err();
        assert!(error.to_string().contains(&format!("the limit is {LIMIT}")), "{error}");
    });
}
