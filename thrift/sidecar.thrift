/*
 * The sidecar's Thrift service: HQueue's coprocessor endpoint, as a process beside
 * each RegionServer. Producers send batches of messages for partitions this sidecar
 * owns; it stamps ordered, unique ids and acknowledges once the rows are durable.
 * Scans read any partition. Subscribers written in any language register here
 * (registerSubscriber) and are pushed to through thrift/subscriber.thrift.
 *
 * This file is the contract for clients in every language (docs/clients.md): each
 * error, limit and sentinel a call can meet is written at the call.
 *
 * Transport: buffered or framed; protocol: binary or compact (the server detects
 * all four from the first bytes of each connection, and answers in kind).
 *
 * Security (docs/security.md): a sidecar started with tokens refuses every call on a
 * connection until it has authenticated with hqueueAuthenticate (thrift/auth.thrift),
 * the first message of the connection; a sidecar with TLS speaks only TLS. A call the
 * connection's principal may not make is refused before anything is read or written,
 * with the call's TInvalidMessage (index -1) or, for a call that declares none, a
 * TApplicationException, whose message starts "not authorized:".
 *
 * After any exception declared below the connection stays usable. What no call
 * declares is a TApplicationException: a malformed request, a request over the
 * sidecar's --max-request-bytes (64 MiB by default; a framed one is cut off unread),
 * an internal error. After one, open a new connection (the server may have closed
 * this one), as hqueue's own clients do.
 *
 * Limits, the same for every client:
 * - a message's value: at most 1 MiB (1,048,576 bytes; the sidecar's
 *   --max-payload-bytes), and at most the queue's policy's max_message_bytes when it
 *   sets one (docs/namespaces.md); a topic: 1..255 bytes of UTF-8;
 * - on a queue whose policy enforces schemas, a message of a topic with a schema is
 *   a record of one of its live versions (the 5-byte header, then the encoded record:
 *   docs/schemas.md);
 * - a queue name: 1-128 characters of [A-Za-z0-9_.-], after an optional namespace
 *   (1-64 of [A-Za-z0-9_]) and a colon;
 * - partitions: 0..32767, and below the queue's partition count;
 * - a scan: limit 1..10,000 messages, bounds of at most 12 bytes, answers of about
 *   8 MiB at most.
 */

namespace py hqueue_sidecar
namespace java org.hqueue.sidecar
namespace go hqueue.sidecar
namespace js HQueueSidecar
namespace netstd HQueue.Sidecar
namespace cpp hqueue.sidecar
namespace rs hqueue_sidecar
namespace rb HQueue.Sidecar
namespace php HQueue.Sidecar

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
   per value or a single entry that applies to every value (any other length:
   TInvalidMessage with index -1). An empty `values` is answered with empty ids.

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

/* A message's id within its partition: milliseconds since the epoch, then the order
   within that millisecond (0..32767). Ids compare as (timestamp, sequence); their
   text form is "timestamp:sequence". */
struct TMessageId {
  1: required i64 timestamp
  2: required i32 sequence
}

/* The ids of a batch, by column, in the batch's order. */
struct TMessageIds {
  1: required list<i64> timestamps
  2: required list<i32> sequences
}

/* The sidecar does not own `partition` (or cannot confirm that it still does), or is
   shutting down. `ownerAddress` is the owner's HOST:PORT when the sidecar knows it:
   send the batch there; absent, look the owner up again (or wait: ownership moves
   within the cluster's session timeout) and retry with backoff. Retriable: the
   partition exists (a partition the queue does not have is TInvalidMessage). Nothing
   of the batch was written. */
exception TNotOwner {
  1: required string message
  2: required i32 partition
  3: optional string ownerAddress
}

/* No queue of that name. Not retriable (until the queue is created). Nothing was
   written. */
exception TQueueNotFound {
  1: required string message
}

/* The request is invalid; not retriable as it is. `index` is the place in the batch
   of the first message at fault: a partition outside 0..32767 or that the queue does
   not have, a topic that is not 1..255 bytes of UTF-8, a value over the payload limit
   (1 MiB unless the sidecar says otherwise) or over the queue's max_message_bytes, a
   value that is no record of a live schema version of its topic on a queue that
   enforces schemas (the message names the topic and the field). `index` is -1 when no one message is at
   fault: a malformed batch (topics or partitions of the wrong length, a producer
   sequence missing a field), a bad scan request (limit outside 1..10,000, a bound
   over 12 bytes, a bad topic filter), a bad registration, a bad queue name, or a
   denial (the message starts "not authorized:"). Nothing was written. */
exception TInvalidMessage {
  1: required string message
  2: required i32 index
}

/* The sidecar cannot serve the call now (still starting, its storage or metadata
   unreachable, a write that failed). Retriable with backoff; a put answered so was
   not acknowledged (with TMessageBatch.sequences, its retry is written once). */
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

/* A read of rows [startRow, stopRow) of a queue table, keeping only `topics` when
   given, at most `limit` messages (1..10,000).

   A rowkey is 12 bytes, big-endian: partition (u16), timestamp (u64, ms), sequence
   (u16). A bound is a rowkey or a shorter prefix of one (the 2-byte partition alone
   is a partition's first row; partition + 1 is the row after its last); longer
   bounds are refused (TInvalidMessage, index -1). An empty startRow is the first
   row, an empty stopRow the end of the queue's messages.

   To read on after an answer, start at the rowkey after the last one received (the
   12-byte rowkey read as an unsigned integer, plus one), never its bytes + "\0". */
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
   8 MiB); an empty answer does. Every view lies inside `data`. */
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

/* Delivery of one partition of one subscription by this sidecar (the partition's
   owner; other sidecars report none of it). `delivered` is the
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

/* A subscriber to register (or whose registration to renew) for subscription
   `subscription` (1-200 characters of [A-Za-z0-9_.:@=+,-], starting with a letter, a
   digit or '_') of a queue. The subscriber serves thrift/subscriber.thrift at `address` (HOST:PORT,
   reachable from every sidecar: the partitions' owners push to it).

   `partitions`, `topics` and `start` apply only when the call creates the
   subscription; an existing one is taken as it is stored:
   - `partitions`: absent or empty, every partition of the queue;
   - `topics`: absent or empty, every topic;
   - `start`: "earliest" (the first message kept), "latest" (the default: the first
     message written from now on) or an id "timestamp:sequence", for every partition.
   `leaseMs`: how long the registration lasts without a renewal; absent, 10,000;
   clamped to 1,000..300,000. */
struct TSubscriberRegistration {
  1: required string subscription
  2: required string address
  3: optional list<i32> partitions
  4: optional list<string> topics
  5: optional string start
  6: optional i32 leaseMs
}

/* A registration granted: the id of the sidecar that holds it, the lease granted in
   milliseconds, the subscription's partitions, and whether this call created the
   subscription. */
struct TSubscriberLease {
  1: required string sidecar
  2: required i32 leaseMs
  3: required list<i32> partitions
  4: required bool created
}

/* Another subscriber's address (`address`) is registered for the subscription: one
   subscriber runs per subscription. A dead subscriber's registration lapses after its
   lease (or its Python subscriber's metadata session); retry after that. */
exception TSubscriberRunning {
  1: required string message
  2: optional string address
}

service HQueueSidecar {
  /* Write the messages, in order, and return their ids in the same order, once they
     are durable. Messages of one partition get strictly increasing ids. All or
     nothing: an exception means none was acknowledged. With `batch.sequences`, a
     partition's part the sidecar has already written is answered with its ids of
     then, not written again.
     Send each partition's messages to its owner (the owner entries in the metadata,
     or the sidecar a TNotOwner names); one call may hold several partitions the
     sidecar owns. TNotOwner and TUnavailable: retry, with backoff (hqueue's own
     client: 50 ms doubling to 1 s, for up to 30 s). TQueueNotFound, TInvalidMessage
     (see there for `index`): do not retry as is. TOutOfOrderSequence: see there. */
  TMessageIds put(1: required string queue, 2: required TMessageBatch batch)
    throws (1: TNotOwner notOwner, 2: TQueueNotFound queueNotFound,
            3: TInvalidMessage invalid, 4: TUnavailable unavailable,
            5: TOutOfOrderSequence outOfOrder)

  /* Read messages straight from the storage (any partition, owned or not): the
     scanners' fast path, which skips decoding HBase's row structs. Any sidecar
     answers for any partition. TInvalidMessage (index -1): a limit outside
     1..10,000, a bound over 12 bytes, a bad topic, or a denial. TUnavailable: the
     storage failed the read; retry. */
  TMessageColumns scan(1: required string queue, 2: required TScanRequest request)
    throws (2: TQueueNotFound queueNotFound, 3: TInvalidMessage invalid,
            4: TUnavailable unavailable)

  /* Which partitions this sidecar owns and the newest id it wrote to each. Served to
     every authenticated connection. */
  TSidecarStatus status()

  /* The queue's partitions this sidecar owns and its deliveries of them (ask every
     sidecar for the whole queue). TQueueNotFound: no such queue. A denial is a
     TInvalidMessage (index -1) whose message starts "not authorized:", as put's. */
  TQueueLag lag(1: required string queue)
    throws (2: TQueueNotFound queueNotFound, 3: TInvalidMessage invalid,
            4: TUnavailable unavailable)

  /* Register the subscriber at `registration.address` for a subscription of `queue`,
     creating the subscription if there is none, or renew its registration: the way a
     subscriber written in any language joins (docs/clients.md). Needs the consume
     right on the queue when the sidecar checks tokens.

     The lease: the registration lasts the granted `leaseMs` from the call. Call
     again, with the same registration, before it runs out (every third of it is the
     advice); each call renews it. A lease that runs out is withdrawn, and pushes
     stop. Renew at the sidecar that granted the lease; if it is unreachable, register
     at any other: the address is announced there once the dead sidecar's session
     expires (its registrations go with it), so pushes pause for at most that long.
     While registered, the owner of each of the subscription's partitions pushes its
     messages to the address (thrift/subscriber.thrift), from the subscription's
     checkpoints, at least once.

     A registration is the principal's that made it: renewing one another principal
     made needs admin (addresses are readable in the metadata).

     TSubscriberRunning: another address is registered. TInvalidMessage (index -1): a
     bad name, address, partition, topic, start or lease, a subscriber group's
     subscription (its members join in Python), or a denial (no consume right, or
     another principal's registration). TUnavailable: the
     metadata store failed; retry. */
  TSubscriberLease registerSubscriber(1: required string queue,
                                      2: required TSubscriberRegistration registration)
    throws (2: TQueueNotFound queueNotFound, 3: TInvalidMessage invalid,
            4: TUnavailable unavailable, 6: TSubscriberRunning running)

  /* Withdraw the registration of the subscriber at `address` for `subscription` of
     `queue` at once (pushes stop; the subscription and its checkpoints stay). Return
     whether a registered address was withdrawn (false: none was, or another
     subscriber's is, which is left alone). Only the principal that registered the
     address, or an admin, may withdraw it; anyone else is refused (TInvalidMessage,
     index -1, "not authorized:") and nothing changes. Errors as registerSubscriber's. */
  bool unregisterSubscriber(1: required string queue, 2: required string subscription,
                            3: required string address)
    throws (2: TQueueNotFound queueNotFound, 3: TInvalidMessage invalid,
            4: TUnavailable unavailable)
}
