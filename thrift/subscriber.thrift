/*
 * A subscriber's Thrift service: the sidecar that owns a partition pushes the
 * messages of a subscription to it, in id order, one batch at a time, and moves the
 * subscription's position on only when the answer is SUCCESS.
 *
 * Transport: buffered or framed; protocol: binary or compact (the server detects
 * both from the first byte of each connection).
 */

namespace py hqueue_subscriber

enum TConsumeStatus {
  /* Every listener took the batch: the sender moves on past it. */
  SUCCESS = 0,
  /* Send the batch again later (the listener is busy or a resource is missing). */
  RETRY_LATER = 1,
  /* A listener failed; the sender retries with a longer backoff. */
  ERROR = 2
}

/* Messages of one partition of one subscription, in id order, by column:
   `rowkeys` holds 12 bytes per message (partition, timestamp, sequence),
   `topics` and `values` one entry per message. `generation` counts the
   subscription's resets: a subscriber forgets what it delivered of a partition
   when a higher generation arrives, and refuses batches of a lower one. */
struct TDelivery {
  1: required string queue
  2: required string subscription
  3: required i32 partition
  4: required i64 generation
  5: required binary rowkeys
  6: required list<string> topics
  7: required list<binary> values
  8: optional string sidecar
}

service HQueueSubscriber {
  /* Hand a batch to the subscriber's listeners, in turn; return how it went. */
  TConsumeStatus consume(1: required TDelivery delivery)
}
