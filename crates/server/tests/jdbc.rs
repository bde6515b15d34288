//! pgJDBC, the Java driver, against the endpoint: prepared statements past
//! its switch to named server-side statements (binary NUMERIC, timestamp and
//! date parameters), a materialized view read after writes, BEGIN/COMMIT and
//! ROLLBACK (honoured when nothing was written, refused after a write),
//! DatabaseMetaData over the system catalog, and the simple query mode.
//! Needs `java` (17+) and the driver's jar (`.ci/run` fetches it with Maven).
mod common;

use common::{connect, serve};

/// pgJDBC's version, as `.ci/run` fetches it.
const PGJDBC_VERSION: &str = "42.7.14";

fn jar() -> std::path::PathBuf {
    let path = std::env::var_os("MILLPOND_PGJDBC_JAR").map(Into::into).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").expect("HOME is set");
        std::path::Path::new(&home).join(format!(".cache/millpond/jdbc/postgresql-{PGJDBC_VERSION}.jar"))
    });
    assert!(
        path.exists(),
        "pgJDBC is not at {}: `.ci/run` fetches it (mvn dependency:copy -Dartifact=org.postgresql:postgresql:{PGJDBC_VERSION} \
         -DoutputDirectory=$HOME/.cache/millpond/jdbc), or set MILLPOND_PGJDBC_JAR",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgjdbc_prepares_binds_reads_and_describes() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let addr = endpoint.addr();
    let program = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jdbc/JdbcSmoke.java");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("java")
            .arg("-Duser.timezone=UTC")
            .arg("-cp")
            .arg(jar())
            .arg(&program)
            .arg(addr.to_string())
            .output()
            .expect("java runs (.ci/run installs a JDK)")
    })
    .await
    .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && stdout.trim_end().ends_with("ok"), "pgJDBC: {stdout}\n{stderr}");
    // Another driver sees what pgJDBC wrote: seven prepared rows, the committed
    // block's, the one a refused ROLLBACK could not take back, the simple mode's.
    let client = connect(addr).await;
    let rows = client.query("SELECT id FROM item ORDER BY id", &[]).await.unwrap();
    let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6, 7, 100, 101, 200]);
    drop(endpoint);
    engine.shutdown().unwrap();
}
