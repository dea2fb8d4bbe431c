/*
 * The sidecar's Thrift service: HQueue's coprocessor endpoint, as a process beside
 * each RegionServer. Producers send batches of messages for partitions this sidecar
 * owns; it stamps ordered, unique ids and acknowledges once the rows are durable.
 *
 * Transport: buffered or framed; protocol: binary or compact (the server detects
 * both from the first byte of each connection).
 */

namespace py hqueue_sidecar

/* Where one partition's messages of a batch sit in their producer's sequence: the
   producer's id and the sequence number of the first of them (Kafka's idempotent
   producer, KIP-98). See `TMessageBatch.sequences`. */
struct TProducerSequence {
  1: required i32 partition
  2: required i64 producerId
  3: required i32 firstSequence
}

/* A batch of messages, by column (decoding lists of plain values costs a fraction
   of decoding a list of structs). `topics` and `partitions` hold either one entry
   per value or a single entry that applies to every value.

   `sequences` (optional) makes the put idempotent, so that a retry whose first
   answer was lost is not written twice. Leave it out and the put is written every
   time it is sent (at-least-once), as before. To use it, a client:
   - picks a producer id: a random i64, new for each producer instance (never reuse
     one after a restart: the sidecar would take the new sequences for old ones);
   - counts, per (producer id, queue, partition), the messages it has sent, from 0:
     the sequence of a message is its place in that count (it never reuses one);
   - sends, for each partition of the batch, one entry: the producer id and the
     sequence of the batch's first message in that partition (its others follow in
     the batch's order); no entry for a partition the batch does not hold;
   - on any failure, sends the same messages again with the same entries, however
     its partitions are grouped into calls (one entry per partition, as above);
   - has at most 5 batches per (producer id, partition) in flight (the sidecar keeps
     the last 5; Kafka's max.in.flight), and sends them in sequence order: the
     sidecar refuses a batch whose sequence leaves a gap;
   - gives up a producer id for a partition whose batch failed for good (it cannot
     know whether it was written): later sequences would be refused as a gap. A new
     random id starts again at 0.
   The sidecar answers a batch it has already written with the ids it gave it then;
   one that follows its last batch is written; any other is refused with
   TOutOfOrderSequence. State unused for a day (by default) is forgotten: then any
   first sequence is accepted. Sequences are i32: at 2^31 take a new producer id. */
struct TMessageBatch {
  1: required list<binary> values
  2: required list<string> topics
  3: required list<i32> partitions
  4: optional list<TProducerSequence> sequences
}

struct TMessageId {
  1: required i64 timestamp
  2: required i32 sequence
}

/* The ids of a batch, by column, in the batch's order. */
struct TMessageIds {
  1: required list<i64> timestamps
  2: required list<i32> sequences
}

/* The sidecar does not own `partition` (or cannot confirm that it still does).
   `ownerAddress` is the owner's HOST:PORT when the sidecar knows it. Nothing of the
   batch was written. */
exception TNotOwner {
  1: required string message
  2: required i32 partition
  3: optional string ownerAddress
}

/* No queue of that name. Nothing of the batch was written. */
exception TQueueNotFound {
  1: required string message
}

/* Message `index` of the batch is invalid (bad partition or topic, payload over the
   limit). Nothing of the batch was written. */
exception TInvalidMessage {
  1: required string message
  2: required i32 index
}

/* The sidecar cannot write now (shutting down, storage unreachable). The batch may
   be retried; it was not acknowledged. */
exception TUnavailable {
  1: required string message
}

/* An idempotent put's `partition` (see TMessageBatch.sequences): its first sequence
   `firstSequence` for `producerId` is neither the next the sidecar expects
   (`expectedSequence`) nor the start of a batch among the last 5 it wrote for that
   producer. firstSequence > expectedSequence: a gap (a batch before it is missing:
   send them in order). firstSequence < expectedSequence: a batch older than the
   ones kept (probably written already; its ids are no longer known). Nothing of the
   batch was written by this call. */
exception TOutOfOrderSequence {
  1: required string message
  2: required i32 partition
  3: required i64 producerId
  4: required i32 firstSequence
  5: required i32 expectedSequence
}

/* A read of rows [startRow, stopRow) of a queue table (12-byte rowkeys or shorter
   prefixes as bounds), keeping only `topics` when given, at most `limit` rows. */
struct TScanRequest {
  1: required binary startRow
  2: required binary stopRow
  3: optional list<string> topics
  4: required i32 limit
}

/* Messages by column, as views into one buffer (the layout of Arrow's view arrays),
   so that neither end builds an object per message:
   - `rowkeys`: 12 bytes per message (partition, timestamp, sequence), concatenated;
   - `data`: bytes the views point into; what lies between views is unspecified (the
     standalone sidecar sends its stored rows as they are);
   - `topicViews`: per message, a little-endian i32 start in `data` and i32 length
     of its UTF-8 topic;
   - `valueViews`: the same for its payload.
   Fewer than `limit` messages does not mean the end (an answer also stops at about
   8 MiB); an empty answer does. */
struct TMessageColumns {
  1: required binary rowkeys
  2: required binary data
  3: required binary topicViews
  4: required binary valueViews
}

struct TPartitionStatus {
  1: required i32 partition
  2: required i64 epoch
  3: optional TMessageId newest
}

struct TSidecarStatus {
  1: required string sidecar
  2: required string address
  3: required bool leader
  /* queue -> owned partitions */
  4: required map<string, list<TPartitionStatus>> partitions
}

/* A partition this sidecar owns: its epoch and the newest id written to it. */
struct TPartitionLag {
  1: required i32 partition
  2: required i64 epoch
  3: optional TMessageId newest
}

/* Delivery of one partition of one subscription by this sidecar. `delivered` is the
   last id the subscriber accepted, `checkpointed` the last one recorded in the
   metadata; `state` is idle, delivering, paused (no subscriber running) or backoff.
   The buffer figures are messages and value bytes now and at their peak. */
struct TDeliveryLag {
  1: required string subscription
  2: required i32 partition
  3: optional TMessageId delivered
  4: optional TMessageId checkpointed
  5: required string state
  6: required i32 bufferedMessages
  7: required i64 bufferedBytes
  8: required i32 peakMessages
  9: required i64 peakBytes
  10: optional string error
  /* The delivery's verdict over the sidecar's sliding window, Burrow's: OK, WARN
     (falling behind), STALL (the subscriber accepts nothing), STOP (no subscriber
     answers), REWIND (the position went backwards). */
  11: optional string status
}

struct TQueueLag {
  1: required string sidecar
  2: required list<TPartitionLag> partitions
  3: required list<TDeliveryLag> deliveries
}

service HQueueSidecar {
  /* Write the messages, in order, and return their ids in the same order, once they
     are durable. Messages of one partition get strictly increasing ids. All or
     nothing: an exception means none was acknowledged. With `batch.sequences`, a
     partition's part the sidecar has already written is answered with its ids of
     then, not written again. */
  TMessageIds put(1: required string queue, 2: required TMessageBatch batch)
    throws (1: TNotOwner notOwner, 2: TQueueNotFound queueNotFound,
            3: TInvalidMessage invalid, 4: TUnavailable unavailable,
            5: TOutOfOrderSequence outOfOrder)

  /* Read messages straight from the storage (any partition, owned or not): the
     scanners' fast path, which skips decoding HBase's row structs. */
  TMessageColumns scan(1: required string queue, 2: required TScanRequest request)
    throws (2: TQueueNotFound queueNotFound, 3: TInvalidMessage invalid,
            4: TUnavailable unavailable)

  /* Which partitions this sidecar owns and the newest id it wrote to each. */
  TSidecarStatus status()

  /* The queue's partitions this sidecar owns and its deliveries of them. */
  TQueueLag lag(1: required string queue)
}
