/*
 * A subscriber's Thrift service: the sidecar that owns a partition pushes the
 * messages of a subscription to it, in id order, one batch at a time, and moves the
 * subscription's position on only past the messages the answer accepts. Delivery is
 * at least once: after a failure, a sidecar restart or a partition's move to another
 * sidecar, a batch may come again (drop ids at or below the last you accepted of the
 * partition, as hqueue's own subscriber does).
 *
 * Transport and protocol of the pushes: sidecars connect with the BUFFERED transport
 * and the BINARY protocol, always; a subscriber written in another language needs to
 * serve only that pair (hqueue's own subscriber also detects framed and compact).
 * With TLS on (the sidecar's --tls-ca), they connect over TLS. A sidecar holding a
 * token (--token-file) sends hqueueAuthenticate (thrift/auth.thrift) as the first
 * message of each connection, so the subscriber's port must answer that method too,
 * beside deliver: with the principal's name after checking the token (take pushes
 * from sidecar principals only), or "anonymous" if it checks none. A sidecar
 * without a token sends deliver calls only.
 *
 * Several sidecars (one per partition owner) push to one subscriber at the same time,
 * each over connections of its own, at most two batches of one subscription in
 * flight per sidecar. Answer within 30 s; a push that fails or times out is sent
 * again after the subscription's backoff. To register a subscriber written in any
 * language, see registerSubscriber in thrift/sidecar.thrift.
 */

namespace py hqueue_subscriber
namespace java org.hqueue.subscriber
namespace go hqueue.subscriber
namespace js HQueueSubscriber
namespace netstd HQueue.Subscriber
namespace cpp hqueue.subscriber
namespace rs hqueue_subscriber
namespace rb HQueue.Subscriber
namespace php HQueue.Subscriber

enum TConsumeStatus {
  /* Every listener took the batch: the sender moves on past it. */
  SUCCESS = 0,
  /* A negative acknowledgement: send the batch (or, with `accepted`, its messages
     from that index on) again, after `retryAfterMs` or the subscription's backoff. */
  RETRY_LATER = 1,
  /* A listener failed; the sender retries after the subscription's backoff. */
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
  /* A group's subscription only: the generation of the group's assignment the
     sidecar routed this batch by, and the member it was routed to. A member
     refuses (RETRY_LATER) a batch of an older generation, for another member, or
     of a partition the assignment does not give it. */
  9: optional i64 groupGeneration
  10: optional string member
  /* How many times the first message of the batch was pushed before without
     being accepted (0 or absent: never). */
  11: optional i32 redeliveries
  /* Set on a batch of one message that failed more than the subscription's
     max_redeliveries: the subscriber writes it to the subscription's dead-letter
     queue, does not hand it to listeners, and answers SUCCESS once the write is
     durable (anything else: the sidecar sends it again). */
  12: optional bool deadLetter
  /* The last failure of the batch's first message the sidecar knows of: a
     listener's error text, or why a push failed. */
  13: optional string lastError
}

/* How a batch went. */
struct TConsumeAnswer {
  1: required TConsumeStatus status
  /* RETRY_LATER: send again after this many milliseconds (absent: the
     subscription's backoff). */
  2: optional i64 retryAfterMs
  /* RETRY_LATER: how many leading messages of the batch were accepted (absent:
     none); the sender moves past them and sends the rest again. */
  3: optional i32 accepted
  /* ERROR (or RETRY_LATER): a listener's error text, at most 1,000 characters. */
  4: optional string error
  /* RETRY_LATER without handing the batch to any listener: it was routed by an
     older group generation or to the wrong member, or the subscriber is closing.
     Not a failure of the messages: it does not count against max_redeliveries. */
  5: optional bool refused
}

service HQueueSubscriber {
  /* Hand a batch to the subscriber's listeners, in turn; return how it went. An
     exception of any kind (none is declared) counts as ERROR: the batch comes again
     after the subscription's backoff. */
  TConsumeAnswer deliver(1: required TDelivery delivery)
}
