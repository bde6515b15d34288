//! The `--from-time` parser of the command line.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/cli/src/time.rs"]
mod time;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = time::parse_time_ms(text);
    }
});
