//! Bytes as a source record's JSON value, decoded into a row of every SQL
//! type: a row whose values have their columns' types, or an error message
//! (the record's dead letter), never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use millpond_sql::{Type, Value};

fuzz_target!(|data: &[u8]| {
    let columns: Vec<(String, Type)> = [
        ("b", Type::Bool),
        ("i", Type::Int),
        ("f", Type::Double),
        ("d", Type::Decimal { precision: 10, scale: 2 }),
        ("t", Type::Text),
        ("ts", Type::Timestamp),
        ("day", Type::Date),
        ("span", Type::Interval),
    ]
    .into_iter()
    .map(|(name, ty)| (name.to_owned(), ty))
    .collect();
    match millpond_sql::decode_json_row(data, &columns) {
        Ok(row) => {
            assert_eq!(row.len(), columns.len());
            for (value, (name, ty)) in row.iter().zip(&columns) {
                let fits = matches!(
                    (value, ty),
                    (Value::Null, _)
                        | (Value::Bool(_), Type::Bool)
                        | (Value::Int(_), Type::Int)
                        | (Value::Double(_), Type::Double)
                        | (Value::Decimal(_), Type::Decimal { .. })
                        | (Value::Text(_), Type::Text)
                        | (Value::Timestamp(_), Type::Timestamp)
                        | (Value::Date(_), Type::Date)
                        | (Value::Interval(_), Type::Interval)
                );
                assert!(fits, "column {name} ({ty}) holds {value:?}");
                // Every value prints (the changelog writes rows as JSON).
                let _ = value.to_json();
            }
        }
        Err(message) => assert!(!message.is_empty()),
    }
});
