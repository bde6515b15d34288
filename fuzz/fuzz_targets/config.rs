//! Topic metadata: any bytes parse to a config or an error; a parsed config
//! either validates or names the field at fault.
#![no_main]

use libfuzzer_sys::fuzz_target;
use millpond_log::TopicConfig;

fuzz_target!(|data: &[u8]| {
    if let Ok(config) = serde_json::from_slice::<TopicConfig>(data) {
        if let Err(error) = config.validate() {
            assert!(!error.to_string().is_empty());
        }
    }
});
