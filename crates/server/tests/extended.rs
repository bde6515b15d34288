//! The extended query protocol with real drivers: tokio-postgres (binary
//! results, inferred parameter types, Describe of statements) and psycopg 3
//! (Python, text formats, its own parameter types), against a running
//! engine whose views run meanwhile.
use std::time::{Duration, Instant, SystemTime};

use tokio_postgres::types::Type;

mod common;
use common::{connect, serve};

fn sqlstate(error: &tokio_postgres::Error) -> String {
    error.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no SQLSTATE: {error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_prepares_binds_and_reads_binary_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let client = connect(endpoint.addr()).await;
    // DDL and DML through Parse/Bind/Execute.
    client
        .execute("CREATE TABLE item (id BIGINT PRIMARY KEY, name TEXT, price DOUBLE, ok BOOLEAN, at TIMESTAMP)", &[])
        .await
        .unwrap();
    let insert = client.prepare("INSERT INTO item VALUES ($1, $2, $3, $4, $5)").await.unwrap();
    assert_eq!(insert.params(), [Type::INT8, Type::TEXT, Type::FLOAT8, Type::BOOL, Type::TIMESTAMP]);
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for (id, name, price, ok) in [(1i64, "apple", 2.5f64, true), (2, "it's; a pear --", -1.25, false)] {
        assert_eq!(client.execute(&insert, &[&id, &name, &price, &ok, &at]).await.unwrap(), 1);
    }
    let null: Option<String> = None;
    let no_time: Option<SystemTime> = None;
    client.execute(&insert, &[&3i64, &null, &0.5f64, &true, &no_time]).await.unwrap();
    // Inferred parameter types and the answer's columns, described.
    let select = client.prepare("SELECT id, name, price, ok, at FROM item WHERE id >= $1 ORDER BY id").await.unwrap();
    assert_eq!(select.params(), [Type::INT8]);
    let types: Vec<&Type> = select.columns().iter().map(|c| c.type_()).collect();
    assert_eq!(types, [&Type::INT8, &Type::TEXT, &Type::FLOAT8, &Type::BOOL, &Type::TIMESTAMP]);
    let rows = client.query(&select, &[&2i64]).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].get::<_, i64>(0), rows[0].get::<_, &str>(1)), (2, "it's; a pear --"), "a value, never SQL");
    assert_eq!((rows[0].get::<_, f64>(2), rows[0].get::<_, bool>(3)), (-1.25, false));
    assert_eq!(rows[0].get::<_, SystemTime>(4), at, "a timestamp in the binary format");
    assert_eq!((rows[1].get::<_, Option<&str>>(1), rows[1].get::<_, Option<SystemTime>>(4)), (None, None));
    // UPDATE and DELETE with parameters in SET and WHERE.
    let update = client.prepare("UPDATE item SET price = $1 WHERE name = $2").await.unwrap();
    assert_eq!(update.params(), [Type::FLOAT8, Type::TEXT]);
    assert_eq!(client.execute(&update, &[&9.0f64, &"apple"]).await.unwrap(), 1);
    assert_eq!(client.execute("DELETE FROM item WHERE id = $1", &[&3i64]).await.unwrap(), 1);
    // A view, read through the extended protocol once it has committed.
    client
        .execute("CREATE MATERIALIZED VIEW priced AS SELECT COUNT(*) AS n, SUM(price) AS total FROM item", &[])
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = client.query_one("SELECT n, total FROM priced", &[]).await.unwrap();
        if row.get::<_, i64>(0) == 2 {
            assert_eq!(row.get::<_, f64>(1), 7.75);
            break;
        }
        assert!(Instant::now() < deadline, "the view never caught up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // LIMIT and OFFSET as parameters; SHOW described and answered.
    let rows = client.query("SELECT id FROM item ORDER BY id LIMIT $1 OFFSET $2", &[&1i64, &1i64]).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>(), [2]);
    let row = client.query_one("SHOW TABLES", &[]).await.unwrap();
    assert_eq!(row.get::<_, &str>(0), "item");
    // Errors: SQLSTATEs at Parse and at Execute; the connection goes on.
    let error = client.prepare("SELECT nope FROM item WHERE id = $1").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42703");
    let error = client.prepare("SELECT id FROM item WHERE id = $4000000000").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42P02", "a placeholder past 65535 is refused, not allocated for");
    let error = client.simple_query("SELECT $1").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42P02", "a simple query has no parameters");
    let error = client.prepare("SELECT 1; SELECT 2").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42601");
    let error = client.query("SELECT id FROM item WHERE name = $1", &[&5i64]).await.unwrap_err();
    assert!(error.to_string().contains("serializing"), "a Rust i64 for a text parameter is refused: {error}");
    assert_eq!(client.query("SELECT id FROM item", &[]).await.unwrap().len(), 2);
    drop(endpoint);
    engine.shutdown().unwrap();
}

const PSYCOPG_SCRIPT: &str = r#"
import sys, psycopg
conn = psycopg.connect(sys.argv[1], autocommit=True)
cur = conn.cursor()
cur.execute("CREATE TABLE city (name TEXT PRIMARY KEY, people BIGINT, area DECIMAL(10, 2))")
cur.executemany("INSERT INTO city VALUES (%s, %s, %s)", [("Oslo", 700000, "454.03"), ("Bergen", 285000, None), ("O'Hare", 1, "1.5")])
cur.execute("SELECT name, people FROM city WHERE people > %s ORDER BY people DESC", (100,))
print(cur.fetchall())
cur.execute("SELECT name FROM city WHERE name = %s", ("O'Hare",))
print(cur.fetchall())
cur.execute("SELECT COUNT(*), SUM(area) FROM city")
print(cur.fetchone())
with conn.transaction():
    cur.execute("UPDATE city SET people = %s WHERE name = %s", (701000, "Oslo"))
cur.execute("SELECT people FROM city WHERE name = 'Oslo'")
print(cur.fetchone())
try:
    cur.execute("SELECT * FROM nowhere")
except psycopg.Error as e:
    print("error", e.sqlstate)
cur.execute("SHOW TABLES")
print(cur.fetchall())
cur.execute("CREATE SOURCE ev (k BIGINT) FROM TOPIC 'ev' FORMAT JSON")
with cur.copy("COPY ev FROM STDIN") as copy:
    for k in range(1000):
        copy.write('{"k": %d}\n' % k)
print("copied", cur.rowcount)
try:
    with cur.copy("COPY nope FROM STDIN") as copy:
        copy.write("x\n")
except psycopg.Error as e:
    print("error", e.sqlstate)
cur.execute("SELECT COUNT(*), SUM(k) FROM ev")
print(cur.fetchone())
"#;

#[test]
fn psycopg_speaks_the_extended_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let url = format!("host=127.0.0.1 port={} user=millpond dbname=millpond", endpoint.addr().port());
    let output = std::process::Command::new("python3")
        .args(["-c", PSYCOPG_SCRIPT, &url])
        .output()
        .expect("python3 runs (.ci/run installs psycopg)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "psycopg failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "[('Oslo', 700000), ('Bergen', 285000)]",
            "[(\"O'Hare\",)]",
            "(3, Decimal('455.53'))",
            "(701000,)",
            "error 42P01",
            "[('city',)]",
            "copied 1000",
            "error 42P01",
            "(1000, 499500)",
        ]
    );
    drop(endpoint);
    engine.shutdown().unwrap();
}
