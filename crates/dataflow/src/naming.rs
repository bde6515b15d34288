//! The names of the topics the runtime writes: view changelogs and
//! dead-letter topics. One place, so that the code that creates them, the
//! code that recognizes (and may delete) them, and the readers agree.
//!
//! Invariant: [`is_sink_topic_name`] holds for every name the other two
//! functions return, and the runtime deletes only topics that it holds for
//! (and that have one partition and no committed end).

pub(crate) const CHANGELOG_TOPIC_PREFIX: &str = "view.";
const DEAD_LETTER_TOPIC_SUFFIX: &str = ".dead-letter";

/// The changelog topic of view `name`: `view.NAME`.
pub fn changelog_topic(name: &str) -> String {
    format!("{CHANGELOG_TOPIC_PREFIX}{name}")
}

/// Name of the dead-letter topic of a source: `SOURCE.dead-letter`. The
/// readers of `Job::source(topic, ..)` and `source_named` are of a source
/// named after their topic, so theirs is `TOPIC.dead-letter`; all readers
/// of a source share it (see [`crate::dead_letter`]).
pub fn dead_letter_topic(source: &str) -> String {
    format!("{source}{DEAD_LETTER_TOPIC_SUFFIX}")
}

/// Whether `topic` is named like a topic a sink writes: a changelog or a
/// dead-letter topic.
pub fn is_sink_topic_name(topic: &str) -> bool {
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
