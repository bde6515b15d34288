//! Dead letters of SQL sources: one topic per source (`SOURCE.dead-letter`),
//! one verdict per record whatever columns a view reads, one letter per
//! rejected record however many views read the source and whenever they
//! were created; the letter is the record as it was, with headers.
use std::collections::BTreeMap;
use std::path::Path;

use millpond_dataflow::{RunStats, RuntimeConfig, StoredRecord, TopicRecord, TopicSpec, Topics};
use millpond_sql::Session;

const SOURCE: &str = "CREATE SOURCE orders (id BIGINT, amount BIGINT, note TEXT, at TIMESTAMP) \
                      FROM TOPIC 'order_events' FORMAT JSON;";
const DEAD_LETTERS: &str = "orders.dead-letter";

/// Good orders `ids`, each with amount id * 10.
fn good(ids: std::ops::Range<i64>) -> Vec<String> {
    ids.map(|id| format!(r#"{{"id": {id}, "amount": {}, "note": "n{id}", "at": "2024-01-01 00:00:00"}}"#, id * 10))
        .collect()
}

/// Records each bad in a column that some view does not read, or in none.
fn bad() -> Vec<String> {
    vec![
        r#"{"id": 100, "amount": "ten"}"#.into(),   // only `totals` reads amount
        r#"{"id": 101, "note": 5}"#.into(),         // no view reads note
        r#"{"id": 102, "at": "yesterday"}"#.into(), // no view reads at
        r#"{"id": 103, "amount": 1"#.into(),        // not JSON
    ]
}

fn append(dir: &Path, values: &[String]) {
    let topics = Topics::open(dir).unwrap();
    topics.ensure("order_events", TopicSpec { partitions: 2, compacted: false, compaction_bounded: false }).unwrap();
    let records = values
        .iter()
        .map(|v| TopicRecord {
            key: Some(v.as_bytes()[..8].to_vec()),
            value: Some(v.clone().into_bytes()),
            headers: vec![],
        })
        .collect();
    topics.append("order_events", records).unwrap();
}

fn run(dir: &Path, sql: &str) -> RunStats {
    let mut session = Session::open(dir).unwrap();
    if let Err(e) = session.execute(sql, Some("test.sql"), true) {
        panic!("{}", e.render(sql));
    }
    let compiled = session.compile().unwrap();
    drop(session);
    millpond_sql::run(RuntimeConfig::new(dir).epoch_interval_ms(20).stop_when_caught_up(true), compiled).unwrap()
}

fn letters(dir: &Path) -> Vec<StoredRecord> {
    let topics = Topics::open(dir).unwrap();
    if !topics.exists(DEAD_LETTERS) {
        return Vec::new();
    }
    topics.read_all(DEAD_LETTERS).unwrap()
}

fn header<'r>(record: &'r StoredRecord, name: &str) -> &'r str {
    let (_, value) = record.headers.iter().find(|(key, _)| key == name).unwrap_or_else(|| panic!("no {name}"));
    std::str::from_utf8(value).unwrap()
}

/// The rejected values, in order of their letters.
fn rejected(dir: &Path) -> Vec<String> {
    letters(dir).iter().map(|l| String::from_utf8(l.value.clone().unwrap()).unwrap()).collect()
}

fn ids(dir: &Path, view: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = millpond_dataflow::read_view(dir, view)
        .unwrap()
        .rows
        .iter()
        .map(|(row, _)| row["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids
}

fn total(dir: &Path) -> i64 {
    let rows = millpond_dataflow::read_view(dir, "totals").unwrap().rows;
    assert_eq!(rows.len(), 1);
    rows[0].0["total"].as_i64().unwrap()
}

fn sorted(mut values: Vec<String>) -> Vec<String> {
    values.sort();
    values
}

#[test]
fn every_view_of_a_source_agrees_on_its_dead_letters_and_each_is_written_once() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut input = good(0..20);
    input.extend(bad());
    append(dir, &input);
    let one = run(
        dir,
        &format!(
            "{SOURCE}\nCREATE MATERIALIZED VIEW order_ids AS SELECT id FROM orders;\n\
             CREATE MATERIALIZED VIEW totals AS SELECT SUM(amount) AS total FROM orders;"
        ),
    );
    // One verdict per record: a view that reads only `id` drops the same
    // records as the one that reads `amount`.
    assert_eq!(ids(dir, "order_ids"), (0..20).collect::<Vec<_>>());
    assert_eq!(total(dir), (0..20).map(|id| id * 10).sum::<i64>());
    // One letter per rejected record, in the source's topic, as it was.
    assert_eq!(one.dead_letters, 4, "{one:?}");
    assert_eq!(sorted(rejected(dir)), sorted(bad()));
    let letters = letters(dir);
    for letter in &letters {
        assert_eq!(header(letter, "millpond.source.topic"), "order_events");
        let partition: u32 = header(letter, "millpond.source.partition").parse().unwrap();
        let offset: u64 = header(letter, "millpond.source.offset").parse().unwrap();
        let topics = Topics::open(dir).unwrap();
        let source = topics.read_all("order_events").unwrap();
        let original = source.iter().find(|r| r.partition == partition && r.offset == offset).unwrap();
        assert_eq!(original.value, letter.value, "the headers name the rejected record");
        assert_eq!(original.key, letter.key);
    }
    let error = |value: &str| {
        let letter = letters.iter().find(|l| l.value.as_deref() == Some(value.as_bytes())).unwrap();
        header(letter, "millpond.error").to_owned()
    };
    assert!(
        error(&bad()[0]).contains("column \"amount\": expected BIGINT, found string \"ten\""),
        "{}",
        error(&bad()[0])
    );
    assert!(error(&bad()[1]).contains("column \"note\": expected TEXT, found number 5"), "{}", error(&bad()[1]));
    assert!(error(&bad()[2]).contains("column \"at\": expected TIMESTAMP"), "{}", error(&bad()[2]));
    let topics: Vec<String> = Topics::open(dir).unwrap().list();
    assert_eq!(topics.iter().filter(|t| t.ends_with(".dead-letter")).collect::<Vec<_>>(), [DEAD_LETTERS], "{topics:?}");

    // A view created later reads the source from its start and rejects the
    // same records: nothing is written again, only the new rejection.
    append(dir, &[good(20..21), vec![r#"{"id": "x"}"#.into()]].concat());
    let two = run(dir, "CREATE MATERIALIZED VIEW notes AS SELECT id, note FROM orders;");
    assert_eq!(ids(dir, "notes"), (0..21).collect::<Vec<_>>());
    assert_eq!(ids(dir, "order_ids"), (0..21).collect::<Vec<_>>());
    assert_eq!(two.dead_letters, 1, "{two:?}");
    assert_eq!(rejected(dir).len(), 5);

    // While no view reads the source, its dead-letter topic and marks stay
    // (the job runs for a view of another source)...
    run(
        dir,
        "DROP MATERIALIZED VIEW notes; DROP MATERIALIZED VIEW order_ids; DROP MATERIALIZED VIEW totals;\n\
         CREATE SOURCE other (id BIGINT) FROM TOPIC 'other' FORMAT JSON;\n\
         CREATE MATERIALIZED VIEW other_ids AS SELECT id FROM other;",
    );
    assert_eq!(rejected(dir).len(), 5);
    let meta = millpond_dataflow::CheckpointMeta::read_published(dir).unwrap().unwrap();
    assert!(meta.readers.keys().all(|reader| !reader.contains("orders")), "{:?}", meta.readers);
    assert!(meta.dead_letters.contains_key(DEAD_LETTERS), "{:?}", meta.dead_letters);
    // ... so a view created later writes only what no view had read.
    append(dir, &[r#"{"id": "y"}"#.to_owned()]);
    let three = run(dir, "CREATE MATERIALIZED VIEW amounts AS SELECT id, amount FROM orders;");
    assert_eq!(three.dead_letters, 1, "only the record no view had read: {three:?}");
    assert_eq!(ids(dir, "amounts"), (0..21).collect::<Vec<_>>());
    let values = rejected(dir);
    assert_eq!(values.len(), 6, "{values:?}");
    assert_eq!(values.iter().collect::<std::collections::BTreeSet<_>>().len(), 6, "no record twice: {values:?}");

    // The topic goes with the source.
    run(dir, "DROP SOURCE orders CASCADE;");
    assert!(!Topics::open(dir).unwrap().exists(DEAD_LETTERS));
}

#[test]
fn the_verdict_does_not_depend_on_the_columns_a_view_reads() {
    // Each record is decoded by views reading every subset of the columns:
    // all accept it, or all reject it with the same error.
    let columns =
        [("id", "BIGINT"), ("amount", "DOUBLE"), ("note", "TEXT"), ("at", "TIMESTAMP"), ("d", "DECIMAL(10,2)")];
    let values = [
        r#"{"id": 1, "amount": 2.5, "note": "x", "at": 0, "d": "1.25"}"#,
        r#"{"id": 1.5}"#,
        r#"{"note": ["x"]}"#,
        r#"{"d": 123456789.5}"#,
        r#"{"at": "2024-13-01 00:00:00"}"#,
        r#"{"amount": "x", "id": "y"}"#,
        r#"{"note": null, "extra": {"deep": [1, 2]}}"#,
        r#"{"id": 1} trailing"#,
    ];
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let declared: Vec<String> = columns.iter().map(|(name, ty)| format!("{name} {ty}")).collect();
    let mut sql = format!("CREATE SOURCE s ({}) FROM TOPIC 's' FORMAT JSON;\n", declared.join(", "));
    for mask in 1..(1u32 << columns.len()) {
        let read: Vec<&str> = (0..columns.len()).filter(|i| mask & (1 << i) != 0).map(|i| columns[i].0).collect();
        sql.push_str(&format!(
            "CREATE MATERIALIZED VIEW v{mask} AS SELECT {}, COUNT(*) AS n FROM s GROUP BY {};\n",
            read.join(", "),
            read.join(", ")
        ));
    }
    let topics = Topics::open(dir).unwrap();
    topics.ensure("s", TopicSpec { partitions: 1, compacted: false, compaction_bounded: false }).unwrap();
    let records =
        values.iter().map(|v| TopicRecord { key: None, value: Some(v.as_bytes().to_vec()), headers: vec![] }).collect();
    topics.append("s", records).unwrap();
    drop(topics);
    let stats = run(dir, &sql);
    let expected_rejected = values.len() - 2;
    assert_eq!(stats.dead_letters as usize, expected_rejected, "{stats:?}");
    for mask in 1..(1u32 << columns.len()) {
        let rows = millpond_dataflow::read_view(dir, &format!("v{mask}")).unwrap().rows;
        let counted: i64 = rows.iter().map(|(row, n)| row["n"].as_i64().unwrap() * n).sum();
        assert_eq!(counted, 2, "view v{mask} counts the two good records: {rows:?}");
    }
    let topics = Topics::open(dir).unwrap();
    let letters = topics.read_all("s.dead-letter").unwrap();
    let errors: BTreeMap<String, String> = letters
        .iter()
        .map(|l| (String::from_utf8(l.value.clone().unwrap()).unwrap(), header(l, "millpond.error").to_owned()))
        .collect();
    assert_eq!(errors.len(), expected_rejected, "{errors:?}");
    assert!(
        errors[r#"{"amount": "x", "id": "y"}"#].contains("column \"amount\""),
        "the first bad field in the record: {errors:?}"
    );
}

#[test]
fn a_redefined_source_judges_its_records_again() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let topics = Topics::open(dir).unwrap();
    topics.ensure("s", TopicSpec { partitions: 1, compacted: false, compaction_bounded: false }).unwrap();
    let values = [r#"{"id": 1, "n": "x"}"#, "not json", r#"{"id": 2, "n": 3}"#];
    let records = values.iter().map(|v| TopicRecord { key: None, value: Some(v.as_bytes().to_vec()), headers: vec![] });
    topics.append("s", records.collect()).unwrap();
    drop(topics);
    let one = run(
        dir,
        "CREATE SOURCE s (id BIGINT) FROM TOPIC 's' FORMAT JSON;\nCREATE MATERIALIZED VIEW v AS SELECT id FROM s;",
    );
    assert_eq!(one.dead_letters, 1);
    assert_eq!(ids(dir, "v"), [1, 2]);
    // Now `n` is declared: the first record is rejected too, though it lies
    // below the mark the first definition's letter left (was: no letter).
    let two = run(dir, "CREATE OR REPLACE SOURCE s (id BIGINT, n BIGINT) FROM TOPIC 's' FORMAT JSON;");
    assert_eq!(ids(dir, "v"), [2]);
    assert_eq!(two.dead_letters, 2, "both records the new definition rejects: {two:?}");
    let letters = Topics::open(dir).unwrap().read_all("s.dead-letter").unwrap();
    let verdicts: Vec<(String, String)> = letters
        .iter()
        .map(|l| {
            (String::from_utf8(l.value.clone().unwrap()).unwrap(), header(l, "millpond.source.verdict").to_owned())
        })
        .collect();
    assert_eq!(verdicts.len(), 3, "{verdicts:?}");
    assert_eq!(verdicts[0].0, "not json");
    assert_eq!((verdicts[1].0.as_str(), verdicts[2].0.as_str()), (values[0], "not json"));
    assert_ne!(verdicts[0].1, verdicts[1].1, "the letters name the definition that judged them");
    assert_eq!(verdicts[1].1, verdicts[2].1);
}
