//! The system catalog over the wire: the real `psql` binary's `\d`
//! commands (the queries psql 15 sends), `information_schema` through a
//! driver, and one-off subqueries, checked against rows worked out by hand.
mod common;

use common::{connect, serve};

/// `psql -At -c COMMAND` against `addr` as user `me` of database `shop`:
/// its stdout lines (`+` in `command`'s place of `\d+`: titles and footers too, `-A` only).
fn psql(addr: std::net::SocketAddr, command: &str) -> Vec<String> {
    let flags = if command.starts_with(r"\d+") { "-A" } else { "-At" };
    let output = std::process::Command::new("psql")
        .args(["-X", flags, "-h", &addr.ip().to_string(), "-p", &addr.port().to_string(), "-U", "me", "shop"])
        .args(["-c", command])
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .expect("psql runs (.ci/run installs postgresql-client)");
    assert!(output.status.success(), "psql {command}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect()
}

/// The rows of a simple query, each as its fields joined by `|` (NULL spelled out).
async fn rows(client: &tokio_postgres::Client, sql: &str) -> Vec<String> {
    let messages = client.simple_query(sql).await.unwrap();
    messages
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_owned()).collect::<Vec<_>>().join("|"))
            }
            _ => None,
        })
        .collect()
}

const SETUP: &str = "CREATE SOURCE clicks (user_id BIGINT, url TEXT) FROM TOPIC 'clicks' FORMAT JSON; \
    CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT, price NUMERIC(10,2)); \
    CREATE VIEW cheap AS SELECT id, name FROM items WHERE price < 10; \
    CREATE MATERIALIZED VIEW per_name AS SELECT name, COUNT(*) AS n FROM items GROUP BY name";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_describes_relations_with_its_own_catalog_queries() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let addr = endpoint.addr();
    connect(addr).await.batch_execute(SETUP).await.unwrap();
    let owned = |rows: &[&str]| rows.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>();
    let lines = tokio::task::spawn_blocking(move || {
        [
            r"\d",
            r"\dt",
            r"\dv",
            r"\dm",
            r"\dE",
            r"\l",
            r"\dn",
            r"\d cheap",
            r"\d+ cheap",
            r"\d items",
            r"\d+ clicks",
            r"\du",
            r"\df",
        ]
        .map(|c| psql(addr, c))
    })
    .await
    .unwrap();
    let [
        all,
        tables,
        views,
        materialized,
        foreign,
        databases,
        schemas,
        cheap,
        cheap_verbose,
        items,
        clicks,
        roles,
        functions,
    ] = lines;
    // \du: the one role, owner of everything; \df: no functions of the user's.
    assert_eq!(roles, owned(&["millpond|Superuser, Create role, Create DB|{}"]));
    assert_eq!(functions, owned(&[]));
    assert_eq!(
        all,
        owned(&[
            "public|cheap|view|millpond",
            "public|clicks|foreign table|millpond",
            "public|items|table|millpond",
            "public|per_name|materialized view|millpond",
        ])
    );
    assert_eq!(tables, owned(&["public|items|table|millpond"]));
    assert_eq!(views, owned(&["public|cheap|view|millpond"]));
    assert_eq!(materialized, owned(&["public|per_name|materialized view|millpond"]));
    assert_eq!(foreign, owned(&["public|clicks|foreign table|millpond"]));
    assert_eq!(databases, owned(&["shop|millpond|UTF8|C|C||libc|"]));
    assert_eq!(schemas, owned(&["public|millpond"]));
    // psql's \d NAME: one line per column (name|type|collation|nullable|default).
    assert_eq!(cheap, owned(&["id|bigint|||", "name|text|||"]));
    assert!(
        cheap_verbose.first().is_some_and(|l| l.contains("View \"public.cheap\""))
            && cheap_verbose.iter().any(|l| l.contains("SELECT id, name FROM items WHERE price < 10")),
        "\\d+ shows the view's definition: {cheap_verbose:?}"
    );
    assert_eq!(items, owned(&["id|bigint|||", "name|text|||", "price|numeric(10,2)|||"]));
    let source = [
        "Foreign table \"public.clicks\"",
        "Column|Type|Collation|Nullable|Default|FDW options|Storage|Stats target|Description",
        "user_id|bigint|||||plain||",
        "url|text|||||extended||",
        "Server: millpond_log",
        "FDW options: (topic 'clicks', format 'json', envelope 'none')",
    ];
    assert_eq!(clicks, owned(&source), "a source is a foreign table of the log, its topic an option");
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn information_schema_and_pg_catalog_follow_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let client = connect(endpoint.addr()).await;
    client.batch_execute(SETUP).await.unwrap();
    let rows = |sql: &'static str| rows(&client, sql);
    let columns = rows(
        "SELECT column_name, data_type, ordinal_position FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name = 'items' ORDER BY ordinal_position",
    )
    .await;
    assert_eq!(columns, ["id|bigint|1", "name|text|2", "price|numeric|3"]);
    let tables =
        rows("SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")
            .await;
    assert_eq!(tables, ["cheap|VIEW", "clicks|FOREIGN", "items|BASE TABLE", "per_name|VIEW"]);
    let types = rows(
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a \
         JOIN pg_catalog.pg_class c ON c.oid = a.attrelid WHERE c.relname = 'per_name' ORDER BY a.attnum",
    )
    .await;
    assert_eq!(types, ["name|text", "n|bigint"]);
    // A dropped view leaves the catalog at once.
    client.batch_execute("DROP VIEW cheap").await.unwrap();
    let left = rows("SELECT relname FROM pg_class WHERE relnamespace = 2200 ORDER BY relname").await;
    assert_eq!(left, ["clicks", "items", "per_name"]);
    assert_eq!(rows("SELECT current_database(), current_user").await, ["millpond|millpond"]);
    // A view cannot read the system catalog: its rows are not changes in the log.
    let refused = client.batch_execute("CREATE VIEW c AS SELECT relname FROM pg_catalog.pg_class").await;
    assert_eq!(refused.unwrap_err().code().unwrap().code(), "0A000");
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_off_subqueries_answer_per_row_with_sqls_null_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let client = connect(endpoint.addr()).await;
    client
        .batch_execute(
            "CREATE TABLE a (x BIGINT); CREATE TABLE b (y BIGINT); \
             INSERT INTO a VALUES (1), (2), (3), (NULL); INSERT INTO b VALUES (2), (3), (3)",
        )
        .await
        .unwrap();
    let answer = |sql: &'static str| rows(&client, sql);
    // Correlated scalar subquery: how many b rows each x matches (0 rows of COUNT is 0).
    assert_eq!(
        answer("SELECT x, (SELECT COUNT(*) FROM b WHERE b.y = a.x) AS n FROM a ORDER BY x NULLS LAST").await,
        ["1|0", "2|1", "3|2", "NULL|0"]
    );
    // A scalar subquery with no row is NULL.
    assert_eq!(answer("SELECT x, (SELECT y FROM b WHERE y = a.x + 10) FROM a WHERE x = 1").await, ["1|NULL"]);
    assert_eq!(answer("SELECT x FROM a WHERE EXISTS (SELECT 1 FROM b WHERE y = x) ORDER BY x").await, ["2", "3"]);
    assert_eq!(
        answer("SELECT x FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE y = x) ORDER BY x NULLS LAST").await,
        ["1", "NULL"]
    );
    assert_eq!(answer("SELECT x FROM a WHERE x IN (SELECT y FROM b) ORDER BY x").await, ["2", "3"]);
    // NOT IN over a list holding NULL is never TRUE.
    assert_eq!(answer("SELECT x FROM a WHERE x NOT IN (SELECT y FROM b) ORDER BY x").await, ["1"]);
    client.batch_execute("INSERT INTO b VALUES (NULL)").await.unwrap();
    assert!(answer("SELECT x FROM a WHERE x NOT IN (SELECT y FROM b)").await.is_empty());
    assert_eq!(
        answer("SELECT array_to_string(ARRAY(SELECT y FROM b WHERE y > 0 ORDER BY y DESC), ',')").await,
        ["3,3,2"]
    );
    // More than one row where one value is wanted is an error, not a guess.
    let error = client.simple_query("SELECT (SELECT y FROM b WHERE y > 0) FROM a").await.unwrap_err();
    let error = error.as_db_error().unwrap();
    assert_eq!(
        (error.code().code(), error.message()),
        ("21000", "more than one row returned by a subquery used as an expression")
    );
    // A view maintains IN (SELECT ...) as a join, with the same answer.
    client.batch_execute("CREATE MATERIALIZED VIEW v AS SELECT x FROM a WHERE x IN (SELECT y FROM b)").await.unwrap();
    let once = answer("SELECT x FROM a WHERE x IN (SELECT y FROM b) ORDER BY x").await;
    assert!(!once.is_empty());
    assert_eq!(answer("SELECT x FROM v ORDER BY x").await, once);
    // A scalar subquery a view cannot prove to return one row is refused.
    let refused = client.batch_execute("CREATE VIEW w AS SELECT (SELECT y FROM b WHERE y > 0) AS y FROM a").await;
    assert_eq!(refused.unwrap_err().code().unwrap().code(), "0A000");
    drop(endpoint);
    engine.shutdown().unwrap();
}
