//! librdkafka's consumer queue read in batches, for the Kafka source.
//!
//! `BaseConsumer::poll` hands out one message per call, and each call reads
//! the clock four times (twice in rdkafka, twice in librdkafka), takes the
//! queue's lock and sets up an event: about a quarter of the source
//! worker's time in the profile of `millpond bench kafka`
//! (docs/performance.md, issue 13). `rd_kafka_consume_batch_queue` takes up
//! to [`BATCH_MESSAGES_MAX`] messages in one call with one clock read at
//! each end. rdkafka has no safe wrapper for it, so this module is the
//! crate's only unsafe code: a handle on the consumer's queue, and a view
//! of each taken message that lives as long as the callback it is lent to.
//!
//! The queue must only hold what `rd_kafka_consume_batch_queue` can return
//! (messages and consumer errors): the consumer it serves is assigned its
//! partitions (no group rebalances), commits no offsets and collects no
//! statistics, which is how the Kafka source configures it. Other
//! callbacks (errors, logs) are served by librdkafka inside the call.
//!
//! Invariants: every message taken is destroyed exactly once, after the
//! last borrow of it ends (a guard destroys the rest if the callback
//! panics); the queue handle is released before the consumer it came from
//! (it is declared before the consumer in [`BatchConsumer`]).

#![allow(unsafe_code)]

use std::ptr::{NonNull, null, null_mut};

use millpond_log::Header;
use rdkafka::bindings as rdsys;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::RDKafkaErrorCode;

/// Messages one call takes at most.
pub(crate) const BATCH_MESSAGES_MAX: usize = 1_024;

/// A consumer and its queue, read in batches.
pub(crate) struct BatchConsumer {
    // Declared first: dropped (released) before the consumer.
    queue: Queue,
    consumer: BaseConsumer,
    taken: Vec<*mut rdsys::rd_kafka_message_t>,
}

/// librdkafka's consumer queue of one consumer (a reference it counts).
struct Queue(NonNull<rdsys::rd_kafka_queue_t>);

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: the pointer came from rd_kafka_queue_get_consumer, which
        // returned a new reference that only this handle releases, once.
        unsafe { rdsys::rd_kafka_queue_destroy(self.0.as_ptr()) }
    }
}

impl BatchConsumer {
    /// `None` when the consumer has no consumer queue (no `group.id`).
    pub(crate) fn new(consumer: BaseConsumer) -> Option<BatchConsumer> {
        use rdkafka::consumer::Consumer;
        // SAFETY: the client pointer is valid while `consumer` lives; the
        // queue reference returned is released by `Queue::drop`, which runs
        // before `consumer` is dropped (field order).
        let queue = unsafe { rdsys::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        let queue = Queue(NonNull::new(queue)?);
        Some(BatchConsumer { queue, consumer, taken: Vec::with_capacity(BATCH_MESSAGES_MAX) })
    }

    /// The consumer, for metadata, watermarks and assignment.
    pub(crate) fn consumer(&self) -> &BaseConsumer {
        &self.consumer
    }

    /// Takes what the queue holds now, up to [`BATCH_MESSAGES_MAX`], and
    /// lends each to `each` in queue order. Returns how many were taken.
    pub(crate) fn take(&mut self, mut each: impl FnMut(&Taken<'_>)) -> usize {
        self.taken.clear();
        self.taken.resize(BATCH_MESSAGES_MAX, null_mut());
        // SAFETY: the queue is live (owned by self); `taken` has room for
        // BATCH_MESSAGES_MAX pointers, the size passed.
        let count = unsafe {
            rdsys::rd_kafka_consume_batch_queue(self.queue.0.as_ptr(), 0, self.taken.as_mut_ptr(), BATCH_MESSAGES_MAX)
        };
        let count = usize::try_from(count).unwrap_or(0);
        assert!(count <= BATCH_MESSAGES_MAX, "librdkafka returned {count} messages for {BATCH_MESSAGES_MAX} slots");
        self.taken.truncate(count);
        let mut guard = Destroy { messages: &self.taken, next: 0 };
        while guard.next < count {
            let message = guard.messages[guard.next];
            // SAFETY: librdkafka returned `count` valid messages, each
            // destroyed only by `guard` once the borrow below has ended.
            each(&Taken(unsafe { &*message }));
            guard.next += 1;
        }
        count
    }
}

/// Destroys the taken messages, all of them: those lent out (before
/// `next`) and, if a callback panicked, those never lent.
struct Destroy<'a> {
    messages: &'a [*mut rdsys::rd_kafka_message_t],
    next: usize,
}

impl Drop for Destroy<'_> {
    fn drop(&mut self) {
        for &message in self.messages {
            // SAFETY: each pointer came from rd_kafka_consume_batch_queue
            // and is destroyed here only, once; no borrow of it outlives
            // the callback it was lent to.
            unsafe { rdsys::rd_kafka_message_destroy(message) }
        }
    }
}

/// A message (or a consumer error) taken from the queue.
pub(crate) struct Taken<'m>(&'m rdsys::rd_kafka_message_t);

impl<'m> Taken<'m> {
    /// The error this entry reports, if it is not a message.
    pub(crate) fn error(&self) -> Option<RDKafkaErrorCode> {
        (self.0.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR).then(|| self.0.err.into())
    }

    pub(crate) fn partition(&self) -> i32 {
        self.0.partition
    }

    pub(crate) fn offset(&self) -> i64 {
        self.0.offset
    }

    pub(crate) fn key(&self) -> Option<&'m [u8]> {
        bytes(self.0.key, self.0.key_len)
    }

    pub(crate) fn payload(&self) -> Option<&'m [u8]> {
        bytes(self.0.payload, self.0.len)
    }

    /// The record's timestamp, ms (`None`: the message has none).
    pub(crate) fn timestamp_ms(&self) -> Option<i64> {
        // SAFETY: the message is live for 'm; a null tstype is allowed.
        let ms = unsafe { rdsys::rd_kafka_message_timestamp(self.0, null_mut()) };
        (ms != -1).then_some(ms)
    }

    /// The message's headers, `None` if it has none.
    pub(crate) fn headers(&self) -> Option<Vec<Header>> {
        let mut headers = null_mut();
        // SAFETY: the message is live; librdkafka keeps the parsed headers
        // with the message (freed with it), so they are read here only.
        let found = unsafe { rdsys::rd_kafka_message_headers(self.0, &mut headers) };
        if found != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || headers.is_null() {
            return None;
        }
        let mut all = Vec::new();
        for index in 0.. {
            let (mut name, mut value, mut size) = (null(), null(), 0usize);
            // SAFETY: `headers` is the message's live header list; the
            // pointers written are valid while the message is.
            let err = unsafe { rdsys::rd_kafka_header_get_all(headers, index, &mut name, &mut value, &mut size) };
            if err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
                break;
            }
            // SAFETY: librdkafka's header names are NUL-terminated strings.
            let key = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned();
            all.push(Header { key, value: bytes(value as *mut _, size).map(<[u8]>::to_vec) });
        }
        Some(all)
    }
}

/// The bytes at `ptr` (`None` for a null pointer: a null key or value).
fn bytes<'m>(ptr: *mut std::ffi::c_void, len: usize) -> Option<&'m [u8]> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: librdkafka gives a key or payload as pointer and length,
    // valid while the message lives ('m, bounded by the `take` callback).
    Some(unsafe { std::slice::from_raw_parts(ptr as *const u8, len) })
}
