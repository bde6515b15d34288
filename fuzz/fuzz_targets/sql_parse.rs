//! SQL text to the parser (sqlparser plus CREATE/DROP SOURCE): any text
//! parses or fails with a line and column inside the text (or just past its
//! end), never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use millpond_sql::Error;

fuzz_target!(|data: &[u8]| {
    let Ok(sql) = std::str::from_utf8(data) else { return };
    match millpond_sql::parse_statements(sql, Some("fuzz.sql")) {
        Ok(_) => {}
        Err(Error::Sql { location, message }) => {
            let lines = sql.matches('\n').count() as u64 + 1;
            assert!(location.line >= 1 && location.line <= lines, "line {} of {lines}: {message}", location.line);
            assert!(location.column >= 1, "{message}");
            let rendered = Error::Sql { location, message }.render(sql);
            assert!(rendered.starts_with("error: "));
        }
        Err(other) => panic!("a parse error without a location: {other}"),
    }
});
