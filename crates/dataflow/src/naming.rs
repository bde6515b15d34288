//! The names of the topics the runtime writes: view changelogs and
//! dead-letter topics. One place, so that the code that creates them, the
//! code that recognizes (and may delete) them, and the readers agree.
//!
//! Invariant: [`is_sink_topic_name`] holds for every name the other two
//! functions return, and the runtime deletes only topics that it holds for
//! (and that have one partition and no committed end).

const CHANGELOG_TOPIC_PREFIX: &str = "view.";
const DEAD_LETTER_TOPIC_SUFFIX: &str = ".dead-letter";

/// The changelog topic of view `name`: `view.NAME`.
pub fn changelog_topic(name: &str) -> String {
    format!("{CHANGELOG_TOPIC_PREFIX}{name}")
}

/// Name of the dead-letter topic of a reader: `READER.dead-letter`. A
/// reader declared with `Job::source(topic, ..)` is named after its topic,
/// so its dead letters go to `TOPIC.dead-letter`. Each reader has its own:
/// two readers of one topic each dead-letter a bad record once.
pub fn dead_letter_topic(reader: &str) -> String {
    format!("{reader}{DEAD_LETTER_TOPIC_SUFFIX}")
}

/// Whether `topic` is named like a topic a sink writes: a changelog or a
/// dead-letter topic.
pub(crate) fn is_sink_topic_name(topic: &str) -> bool {
    topic.starts_with(CHANGELOG_TOPIC_PREFIX) || topic.ends_with(DEAD_LETTER_TOPIC_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_the_runtime_writes_is_recognized_as_a_sink_topic() {
        for name in ["bids", "a.b", "view.x"] {
            assert!(is_sink_topic_name(&changelog_topic(name)));
            assert!(is_sink_topic_name(&dead_letter_topic(name)));
        }
        assert!(!is_sink_topic_name("bids") && !is_sink_topic_name("views.x"));
    }
}
