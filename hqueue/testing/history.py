"""A fault scenario's recorded history, and the check of the write path's guarantees
over it (docs/architecture.md, "The write path's invariants").

A scenario (sidecars killed, frozen or cut off while producers and readers run)
records what each party saw in a :class:`History`, from any thread:

- :meth:`History.acked`: a put that was acknowledged, at the position it was given,
  and, when known, the address of the sidecar that acknowledged it (its *owner*);
- :meth:`History.attempted`: a put whose outcome is unknown (a timeout, a lost
  connection): it may be stored or not, but never twice;
- :meth:`History.read`: a message a reader was given. A reader is a scanner or a
  subscriber, each under a name of its own; its reads of one partition are recorded
  in the order they were delivered;
- :meth:`History.checkpoint`: a subscription's checkpoint, its last delivered id on
  a partition;
- :meth:`History.final`: each row a full scan of the queue found after the scenario.

Every put carries a payload of its own (a retry of a put carries the same one), so a
payload names a message. :func:`check` (or :meth:`History.check`) returns a
:class:`Report` of findings, each a sentence, in these lists:

``lost``
    A message was acknowledged but the final state does not hold it at the position
    acknowledged: it is missing, stored at another position, or its row holds
    another payload (invariant 4: acknowledged means durable).
``duplicates``
    A payload is stored at two or more positions: an acknowledged put, or one of
    unknown outcome that was retried, stored twice.
``out_of_order``
    A reader was given a message of a partition that does not come after the one it
    was given before: an id not strictly greater than the previous one. A read
    recorded with ``redelivery=True`` (an at-least-once subscriber after a
    reconnect) may repeat an id that reader already read; an id it never read must
    still be above every id it read, or the reader had passed over it (invariant 1).
``behind_read_position``
    A row of the final state that a reader passed without reading it: its id lies
    between the lowest and the highest id the reader read on that partition (the
    highest raised to the checkpoints of the subscription of the reader's name), yet
    the reader never read it, or read another payload at that id. The row became
    visible behind a read position (invariant 1: ids increase in the order rows
    become visible).
``deposed_acks``
    Two owners acknowledged writes to one partition at once: an owner acknowledged
    an id above the first id acknowledged by an owner after it, owners ordered by
    their first acknowledged id (invariant 3: one writer). Only acks recorded with
    an owner count.
``unread``
    Only for the readers named in ``complete_readers``: an acknowledged message such
    a reader never read.

:attr:`Report.ok` is true when every list is empty (``unread`` is empty unless
complete readers are named).

What the check takes the recording to mean:

- A reader reads every message of a partition from its first read on: all topics,
  one contiguous run. A reader that starts over elsewhere (a new scan from another
  position, a subscription reset) is recorded under a new name; a subscriber that
  resumes after a crash or a reconnect keeps its name and records its repeated
  reads with ``redelivery=True``.
- A checkpoint of subscription ``S`` belongs to the reader named ``S``, and is
  checked only on partitions where that reader read something.
- An ``owner`` names one tenure of a partition: a sidecar that gets a partition back
  after another owned it is recorded under a new name (its address and epoch, say).

Pure Python, no I/O: the scenario records, the check reads the record.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from hqueue.message import MessageId

__all__ = ["History", "Report", "check"]

_KINDS = (
    "lost",
    "duplicates",
    "out_of_order",
    "behind_read_position",
    "deposed_acks",
    "unread",
)
_SHOWN = 20  # findings of each kind that raise_if_failed shows
_PAYLOAD_CHARS = 40  # a payload is shown as its repr, cut to this length


class _Ack(NamedTuple):
    payload: bytes
    partition: int
    id: MessageId
    owner: str | None


class _Attempt(NamedTuple):
    payload: bytes
    partition: int


class _Read(NamedTuple):
    reader: str
    partition: int
    id: MessageId
    payload: bytes
    redelivery: bool


class _Checkpoint(NamedTuple):
    subscription: str
    partition: int
    id: MessageId


class History:
    """What a scenario's parties saw, recorded from any number of threads.

    Each method appends one event under a lock; :meth:`check` reads a copy, so it may
    run while parties still record (it then checks what was recorded so far).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._acks: list[_Ack] = []
        self._attempts: list[_Attempt] = []
        self._reads: list[_Read] = []
        self._checkpoints: list[_Checkpoint] = []
        self._final: dict[tuple[int, MessageId], bytes] = {}

    def acked(
        self, payload: bytes, partition: int, message_id: MessageId, owner: str | None = None
    ) -> None:
        """Record a put of ``payload`` acknowledged at ``partition``/``message_id``, by
        the sidecar at address ``owner`` when known."""
        ack = _Ack(bytes(payload), partition, MessageId(*message_id), owner)
        with self._lock:
            self._acks.append(ack)

    def attempted(self, payload: bytes, partition: int) -> None:
        """Record a put of ``payload`` to ``partition`` whose outcome is unknown: it may
        be stored or not, but not twice. If a retry of it is acknowledged, record that
        too with :meth:`acked`."""
        attempt = _Attempt(bytes(payload), partition)
        with self._lock:
            self._attempts.append(attempt)

    def read(
        self,
        reader: str,
        partition: int,
        message_id: MessageId,
        payload: bytes,
        redelivery: bool = False,
    ) -> None:
        """Record that ``reader`` was given ``payload`` at ``partition``/``message_id``.

        Record a reader's reads of one partition in the order they were delivered.
        ``redelivery=True`` marks the reads of an at-least-once subscriber after it
        reconnected: those may repeat ids it already read.
        """
        event = _Read(reader, partition, MessageId(*message_id), bytes(payload), redelivery)
        with self._lock:
            self._reads.append(event)

    def checkpoint(self, subscription: str, partition: int, message_id: MessageId) -> None:
        """Record that ``subscription``'s checkpoint (its last delivered id) on
        ``partition`` was written as ``message_id``."""
        event = _Checkpoint(subscription, partition, MessageId(*message_id))
        with self._lock:
            self._checkpoints.append(event)

    def final(self, partition: int, message_id: MessageId, payload: bytes) -> None:
        """Record a row that the full scan after the scenario found.

        Recording a row again with the same payload changes nothing (two scans may
        both be recorded).

        :raises ValueError: if the row was recorded before with another payload: one
            position holds one row, so the recording is wrong.
        """
        key = (partition, MessageId(*message_id))
        payload = bytes(payload)
        with self._lock:
            known = self._final.setdefault(key, payload)
        if known != payload:
            raise ValueError(
                f"row {_at(*key)} recorded twice in the final state, as {_show(known)} "
                f"and as {_show(payload)}"
            )

    def check(self, complete_readers: Iterable[str] = ()) -> Report:
        """Return :func:`check` of this history."""
        return check(self, complete_readers=complete_readers)

    def _copy(
        self,
    ) -> tuple[
        list[_Ack],
        list[_Attempt],
        list[_Read],
        list[_Checkpoint],
        dict[tuple[int, MessageId], bytes],
    ]:
        with self._lock:
            return (
                list(self._acks),
                list(self._attempts),
                list(self._reads),
                list(self._checkpoints),
                dict(self._final),
            )


@dataclass(frozen=True)
class Report:
    """The findings of :func:`check`, each a sentence naming the messages involved
    (the module's docstring says what each kind means), and the history's totals."""

    lost: tuple[str, ...]
    duplicates: tuple[str, ...]
    out_of_order: tuple[str, ...]
    behind_read_position: tuple[str, ...]
    deposed_acks: tuple[str, ...]
    unread: tuple[str, ...]
    acked: int
    """Acknowledged puts recorded."""
    attempted: int
    """Puts of unknown outcome recorded."""
    reads: int
    """Reads recorded, redeliveries included."""
    checkpoints: int
    """Checkpoints recorded."""
    final_rows: int
    """Rows of the final state."""

    @property
    def ok(self) -> bool:
        """Whether nothing was found."""
        return not any(findings for _, findings in self.findings())

    def findings(self) -> list[tuple[str, tuple[str, ...]]]:
        """Each kind of finding's name (its field's) and its findings, in the order
        of the fields."""
        return [(kind, getattr(self, kind)) for kind in _KINDS]

    def table(self) -> str:
        """The counts as a small text table: each kind of finding, the totals, and the
        verdict (``ok`` or ``FAILED``)."""
        rows = [(name.replace("_", " "), len(found)) for name, found in self.findings()]
        rows += [
            ("acked puts", self.acked),
            ("unknown-outcome puts", self.attempted),
            ("reads", self.reads),
            ("checkpoints", self.checkpoints),
            ("final rows", self.final_rows),
        ]
        width = max(len(name) for name, _ in rows)
        digits = max(len(str(count)) for _, count in rows)
        lines = [f"{name:<{width}}  {count:>{digits}}" for name, count in rows]
        lines.append(f"{'verdict':<{width}}  {'ok' if self.ok else 'FAILED'}")
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        """Return if :attr:`ok`.

        :raises AssertionError: naming the first 20 findings of each kind found, and
            how many more there are.
        """
        if self.ok:
            return
        parts = ["the history breaks the write path's guarantees:"]
        for name, found in self.findings():
            if not found:
                continue
            parts.append(f"{name} ({len(found)}):")
            parts.extend(f"  - {finding}" for finding in found[:_SHOWN])
            if len(found) > _SHOWN:
                parts.append(f"  ... and {len(found) - _SHOWN} more")
        raise AssertionError("\n".join(parts))


def check(history: History, *, complete_readers: Iterable[str] = ()) -> Report:
    """Check ``history`` against the write path's guarantees and return the findings.

    ``complete_readers`` names readers that should have read every acknowledged
    message (a scan of the whole queue after the scenario, a subscriber from the
    start that ran to the end); what they missed is reported as ``unread``.
    """
    acks, attempts, reads, checkpoints, final = history._copy()
    at_of: dict[bytes, list[tuple[int, MessageId]]] = defaultdict(list)
    for key, payload in sorted(final.items()):
        at_of[payload].append(key)
    by_reader: dict[tuple[str, int], list[_Read]] = defaultdict(list)
    for event in reads:
        by_reader[event.reader, event.partition].append(event)
    return Report(
        lost=tuple(_lost(acks, final, at_of)),
        duplicates=tuple(_duplicates(acks, attempts, at_of)),
        out_of_order=tuple(_out_of_order(by_reader)),
        behind_read_position=tuple(_behind(by_reader, checkpoints, final)),
        deposed_acks=tuple(_deposed(acks)),
        unread=tuple(_unread(acks, reads, complete_readers)),
        acked=len(acks),
        attempted=len(attempts),
        reads=len(reads),
        checkpoints=len(checkpoints),
        final_rows=len(final),
    )


def _lost(
    acks: list[_Ack],
    final: dict[tuple[int, MessageId], bytes],
    at_of: dict[bytes, list[tuple[int, MessageId]]],
) -> list[str]:
    found: list[str] = []
    for ack in acks:
        stored = final.get((ack.partition, ack.id))
        if stored == ack.payload:
            continue
        where = f"{_show(ack.payload)} acked at {_at(ack.partition, ack.id)}"
        elsewhere = at_of.get(ack.payload)
        if elsewhere:
            places = ", ".join(_at(*key) for key in elsewhere)
            found.append(f"{where}: stored at {places} instead")
        elif stored is not None:
            found.append(f"{where}: that row holds {_show(stored)} instead")
        else:
            found.append(f"{where}: not in the final state")
    return found


def _duplicates(
    acks: list[_Ack],
    attempts: list[_Attempt],
    at_of: dict[bytes, list[tuple[int, MessageId]]],
) -> list[str]:
    acked_at = {ack.payload: (ack.partition, ack.id) for ack in acks}
    unknown = {attempt.payload for attempt in attempts}
    found: list[str] = []
    for payload, keys in at_of.items():
        if len(keys) < 2:
            continue
        if payload in acked_at:
            origin = f"acked at {_at(*acked_at[payload])}"
        elif payload in unknown:
            origin = "outcome unknown"
        else:
            origin = "never put"
        places = ", ".join(_at(*key) for key in keys)
        found.append(f"{_show(payload)} stored {len(keys)} times: {places} ({origin})")
    return found


def _out_of_order(by_reader: dict[tuple[str, int], list[_Read]]) -> list[str]:
    found: list[str] = []
    for (reader, partition), events in by_reader.items():
        seen: set[MessageId] = set()
        previous: MessageId | None = None
        highest: MessageId | None = None
        for event in events:
            if previous is not None and highest is not None:
                verb = "redelivered" if event.redelivery else "read"
                where = f"{reader} on partition {partition}: {verb} {event.id} after {previous}"
                repeat = event.redelivery and event.id in seen
                if event.id <= previous and not repeat:
                    found.append(where)
                elif previous < event.id <= highest and event.id not in seen:
                    # After redeliveries the previous id is below the highest: an id
                    # between them that was never read had been passed over before.
                    found.append(f"{where}, though it had read up to {highest} without it")
            seen.add(event.id)
            previous = event.id
            highest = event.id if highest is None else max(highest, event.id)
    return found


def _behind(
    by_reader: dict[tuple[str, int], list[_Read]],
    checkpoints: list[_Checkpoint],
    final: dict[tuple[int, MessageId], bytes],
) -> list[str]:
    rows: dict[int, list[tuple[MessageId, bytes]]] = defaultdict(list)
    for (partition, message_id), payload in sorted(final.items()):
        rows[partition].append((message_id, payload))
    ids = {partition: [row[0] for row in part] for partition, part in rows.items()}
    checkpointed: dict[tuple[str, int], MessageId] = {}
    for event in checkpoints:
        key = (event.subscription, event.partition)
        checkpointed[key] = max(event.id, checkpointed.get(key, event.id))
    found: list[str] = []
    for (reader, partition), events in by_reader.items():
        read = {(event.id, event.payload) for event in events}
        read_ids = {event.id for event in events}
        lowest = min(event.id for event in events)
        highest = max(event.id for event in events)
        last = max(highest, checkpointed.get((reader, partition), highest))
        part = rows.get(partition, [])
        start = bisect.bisect_left(ids.get(partition, []), lowest)
        stop = bisect.bisect_right(ids.get(partition, []), last)
        for message_id, payload in part[start:stop]:
            if (message_id, payload) in read:
                continue
            row = f"{_at(partition, message_id)} ({_show(payload)})"
            if message_id in read_ids:
                found.append(
                    f"{row}: {reader} read another payload there: "
                    "the row was replaced after it was read"
                )
            elif message_id > highest:
                found.append(
                    f"{row}: {reader} never read it, though its subscription's "
                    f"checkpoint passed it at {last}: it became visible behind it"
                )
            else:
                found.append(
                    f"{row}: {reader} never read it, though it read {lowest}..{highest} "
                    "around it: it became visible behind the read position"
                )
    return found


def _deposed(acks: list[_Ack]) -> list[str]:
    owned: dict[int, list[tuple[str, _Ack]]] = defaultdict(list)
    for ack in acks:
        if ack.owner is not None:
            owned[ack.partition].append((ack.owner, ack))
    found: list[str] = []
    for partition, part in owned.items():
        first: dict[str, MessageId] = {}
        for owner, ack in part:
            first[owner] = min(ack.id, first.get(owner, ack.id))
        # Owners in the order they came, by their first acknowledged id; on a tie
        # (two owners acknowledged one id, itself two writers at once) the owner
        # whose acks were recorded first counts as the earlier.
        order = sorted(first, key=lambda owner: first[owner])
        rank = {owner: index for index, owner in enumerate(order)}
        for owner, ack in part:
            for later in order[rank[owner] + 1 :]:
                if ack.id >= first[later]:
                    found.append(
                        f"partition {partition}: {owner} acked {ack.id} "
                        f"({_show(ack.payload)}) at or above {first[later]}, the first id "
                        f"acked by the later owner {later}: two writers at once"
                    )
                    break
    return found


def _unread(acks: list[_Ack], reads: list[_Read], complete_readers: Iterable[str]) -> list[str]:
    found: list[str] = []
    for reader in complete_readers:
        read = {event.payload for event in reads if event.reader == reader}
        found.extend(
            f"{reader} never read {_show(ack.payload)}, acked at {_at(ack.partition, ack.id)}"
            for ack in acks
            if ack.payload not in read
        )
    return found


def _at(partition: int, message_id: MessageId) -> str:
    """A position in its text form, ``partition@timestamp:sequence``."""
    return f"{partition}@{message_id}"


def _show(payload: bytes) -> str:
    text = repr(payload)
    return text if len(text) <= _PAYLOAD_CHARS else text[: _PAYLOAD_CHARS - 3] + "..."
