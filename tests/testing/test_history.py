"""hqueue.testing.history: each finding from a hand-made history, and, for random
correct runs of a small model, no finding before one mutation and the matching one
after it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hqueue.message import MAX_SEQUENCE, MessageId
from hqueue.testing.history import History, Report, check


def _id(timestamp: int, sequence: int = 0) -> MessageId:
    return MessageId(timestamp, sequence)


def _clean() -> History:
    """Three messages acked on partition 0 by s1, then s2; a scanner and a subscriber
    read them all, the subscriber checkpointing; one put of unknown outcome stored,
    one not."""
    history = History()
    for timestamp, payload, owner in ((10, b"a", "s1"), (20, b"b", "s1"), (30, b"c", "s2")):
        history.acked(payload, 0, _id(timestamp), owner=owner)
        history.final(0, _id(timestamp), payload)
    history.attempted(b"u1", 0)
    history.final(0, _id(40), b"u1")
    history.attempted(b"u2", 0)
    for reader in ("scan", "sub"):
        _deliver(history, reader, (10, b"a"), (20, b"b"), (30, b"c"), (40, b"u1"))
    history.checkpoint("sub", 0, _id(30))
    return history


def _store(history: History, partition: int, *rows: tuple[int, bytes]) -> None:
    """Record final rows, each given as (timestamp, payload)."""
    for timestamp, payload in rows:
        history.final(partition, _id(timestamp), payload)


def _deliver(history: History, reader: str, *rows: tuple[int, bytes]) -> None:
    """Record reads of partition 0 by ``reader``, each row as (timestamp, payload)."""
    for timestamp, payload in rows:
        history.read(reader, 0, _id(timestamp), payload)


def _flagged(report: Report) -> dict[str, tuple[str, ...]]:
    return {kind: found for kind, found in report.findings() if found}


# -- a clean history -------------------------------------------------------------------


def test_a_clean_history_is_ok() -> None:
    report = check(_clean())
    assert report.ok
    assert _flagged(report) == {}
    assert (report.acked, report.attempted, report.reads) == (3, 2, 8)
    assert (report.checkpoints, report.final_rows) == (1, 4)
    report.raise_if_failed()
    assert _clean().check() == report


def test_the_table_counts_each_kind_and_the_totals() -> None:
    history = _clean()
    history.final(0, _id(50), b"a")
    assert check(history).table() == "\n".join(
        [
            "lost                  0",
            "duplicates            1",
            "out of order          0",
            "behind read position  0",
            "deposed acks          0",
            "unread                0",
            "acked puts            3",
            "unknown-outcome puts  2",
            "reads                 8",
            "checkpoints           1",
            "final rows            5",
            "verdict               FAILED",
        ]
    )
    assert check(_clean()).table().endswith("verdict               ok")


# -- lost --------------------------------------------------------------------------------


def test_an_acked_message_missing_from_the_final_state_is_lost() -> None:
    history = History()
    history.acked(b"a", 0, _id(10))
    history.acked(b"b", 1, _id(10, 3))
    history.final(1, _id(10, 3), b"b")
    assert _flagged(check(history)) == {"lost": ("b'a' acked at 0@10:0: not in the final state",)}


def test_an_acked_message_stored_at_another_position_is_lost() -> None:
    history = History()
    history.acked(b"a", 0, _id(10))
    history.final(0, _id(11), b"a")
    assert _flagged(check(history)) == {"lost": ("b'a' acked at 0@10:0: stored at 0@11:0 instead",)}


def test_an_acked_message_whose_row_holds_another_payload_is_lost() -> None:
    history = History()
    history.acked(b"a", 0, _id(10))
    history.final(0, _id(10), b"z")
    assert _flagged(check(history)) == {
        "lost": ("b'a' acked at 0@10:0: that row holds b'z' instead",)
    }


def test_a_put_of_unknown_outcome_may_be_missing() -> None:
    history = History()
    history.attempted(b"a", 0)
    assert check(history).ok


def test_a_long_payload_is_shown_cut() -> None:
    history = History()
    history.acked(b"x" * 100, 0, _id(10))
    (finding,) = check(history).lost
    assert finding == "b'" + "x" * 35 + "... acked at 0@10:0: not in the final state"


# -- duplicates --------------------------------------------------------------------------


def test_a_payload_stored_twice_is_a_duplicate() -> None:
    history = History()
    history.acked(b"a", 0, _id(10))
    history.final(0, _id(10), b"a")
    history.final(2, _id(5), b"a")
    history.attempted(b"u", 1)
    _store(history, 1, (7, b"u"), (8, b"u"), (9, b"u"), (20, b"?"), (21, b"?"))
    assert _flagged(check(history)) == {
        "duplicates": (
            "b'a' stored 2 times: 0@10:0, 2@5:0 (acked at 0@10:0)",
            "b'u' stored 3 times: 1@7:0, 1@8:0, 1@9:0 (outcome unknown)",
            "b'?' stored 2 times: 1@20:0, 1@21:0 (never put)",
        )
    }


def test_the_same_row_recorded_twice_in_the_final_state_is_one_row() -> None:
    history = History()
    history.final(0, _id(10), b"a")
    history.final(0, _id(10), b"a")
    assert check(history).final_rows == 1
    with pytest.raises(ValueError, match=r"row 0@10:0 recorded twice .* as b'a' and as b'b'"):
        history.final(0, _id(10), b"b")


# -- out of order ------------------------------------------------------------------------


def test_a_read_not_above_the_one_before_is_out_of_order() -> None:
    history = History()
    history.read("scan", 0, _id(10), b"a")
    history.read("scan", 1, _id(50), b"x")  # other partitions and readers interleave
    history.read("sub", 0, _id(30), b"c")
    history.read("scan", 0, _id(30), b"c")
    history.read("scan", 0, _id(20), b"b")
    history.read("scan", 0, _id(20), b"b")
    history.read("scan", 1, _id(60), b"y")
    assert _flagged(check(history))["out_of_order"] == (
        "scan on partition 0: read 20:0 after 30:0",
        "scan on partition 0: read 20:0 after 20:0",
    )


def test_a_redelivery_may_repeat_what_was_read_but_not_skip() -> None:
    history = History()
    _deliver(history, "sub", (10, b"a"), (20, b"b"), (40, b"d"))
    # After a reconnect: 10 and 20 again, which is allowed; 30, which it never read
    # though it read 40, is not: 30 had been passed over.
    for timestamp, payload in ((10, b"a"), (20, b"b"), (30, b"c"), (40, b"d"), (50, b"e")):
        history.read("sub", 0, _id(timestamp), payload, redelivery=True)
    history.read("sub", 0, _id(60), b"f")
    history.read("sub", 0, _id(5), b"z", redelivery=True)
    assert check(history).out_of_order == (
        "sub on partition 0: redelivered 30:0 after 20:0, though it had read up to 40:0 without it",
        "sub on partition 0: redelivered 5:0 after 60:0",
    )


def test_a_read_below_the_highest_after_redeliveries_is_out_of_order() -> None:
    history = History()
    for timestamp in (10, 20, 40):
        history.read("sub", 0, _id(timestamp), b"%d" % timestamp)
    history.read("sub", 0, _id(10), b"10", redelivery=True)
    history.read("sub", 0, _id(30), b"30")
    assert check(history).out_of_order == (
        "sub on partition 0: read 30:0 after 10:0, though it had read up to 40:0 without it",
    )


# -- behind the read position ------------------------------------------------------------


def test_a_row_between_reads_that_the_reader_never_read_is_behind() -> None:
    history = _clean()
    history.final(0, _id(25), b"late")
    history.final(0, _id(5), b"early")  # below every read: the readers started after it
    history.final(0, _id(45), b"new")  # above every read: not read yet
    assert _flagged(check(history)) == {
        "behind_read_position": (
            "0@25:0 (b'late'): scan never read it, though it read 10:0..40:0 around it: "
            "it became visible behind the read position",
            "0@25:0 (b'late'): sub never read it, though it read 10:0..40:0 around it: "
            "it became visible behind the read position",
        )
    }


def test_a_row_read_with_another_payload_was_replaced() -> None:
    history = History()
    _deliver(history, "scan", (10, b"a"), (20, b"old"), (30, b"c"))
    _store(history, 0, (10, b"a"), (20, b"new"), (30, b"c"))
    assert _flagged(check(history)) == {
        "behind_read_position": (
            "0@20:0 (b'new'): scan read another payload there: "
            "the row was replaced after it was read",
        )
    }


def test_a_row_under_a_checkpoint_that_the_reader_never_read_is_behind() -> None:
    history = History()
    _deliver(history, "sub", (10, b"a"))
    history.checkpoint("sub", 0, _id(10))
    history.checkpoint("sub", 0, _id(30))
    history.checkpoint("other", 0, _id(99))  # no reader of that name: not checked
    history.checkpoint("sub", 1, _id(99))  # no read by sub on partition 1: not checked
    _store(history, 0, (10, b"a"), (20, b"b"), (30, b"c"), (40, b"d"))
    _store(history, 1, (5, b"p1"))
    assert check(history).behind_read_position == (
        "0@20:0 (b'b'): sub never read it, though its subscription's checkpoint passed "
        "it at 30:0: it became visible behind it",
        "0@30:0 (b'c'): sub never read it, though its subscription's checkpoint passed "
        "it at 30:0: it became visible behind it",
    )


# -- deposed acks ------------------------------------------------------------------------


def test_an_earlier_owner_acking_above_a_later_owners_first_id_is_deposed() -> None:
    history = History()
    acks = [
        (b"a", _id(10), "s1"),
        (b"b", _id(20), "s1"),
        (b"c", _id(30), "s2"),
        (b"d", _id(35), "s1"),  # s1 was deposed at 30
        (b"e", _id(40), "s2"),
        (b"f", _id(45), None),  # no owner known: not counted
        (b"g", _id(50), "s3"),
    ]
    for payload, message_id, owner in acks:
        history.acked(payload, 0, message_id, owner=owner)
        history.final(0, message_id, payload)
    # Owners are per partition: s2 before s1 on partition 1 is another tenure.
    history.acked(b"h", 1, _id(10), owner="s2")
    history.acked(b"i", 1, _id(20), owner="s1")
    _store(history, 1, (10, b"h"), (20, b"i"))
    assert _flagged(check(history)) == {
        "deposed_acks": (
            "partition 0: s1 acked 35:0 (b'd') at or above 30:0, the first id acked by "
            "the later owner s2: two writers at once",
        )
    }


def test_two_owners_acking_one_id_is_deposed() -> None:
    history = History()
    history.acked(b"a", 0, _id(10), owner="s1")
    history.acked(b"b", 0, _id(10), owner="s2")
    history.final(0, _id(10), b"b")
    assert check(history).deposed_acks == (
        "partition 0: s1 acked 10:0 (b'a') at or above 10:0, the first id acked by "
        "the later owner s2: two writers at once",
    )


# -- unread ------------------------------------------------------------------------------


def test_a_complete_reader_must_read_every_acked_message() -> None:
    history = _clean()
    _deliver(history, "tail", (20, b"b"), (30, b"c"))
    report = check(history, complete_readers=["tail", "scan"])
    assert _flagged(report) == {"unread": ("tail never read b'a', acked at 0@10:0",)}
    assert not report.ok
    assert check(history).ok


# -- raising, and recording from threads --------------------------------------------------


def test_raise_if_failed_names_the_first_twenty_of_each_kind() -> None:
    history = History()
    for timestamp in range(25):
        history.acked(b"%d" % timestamp, 0, _id(timestamp))
    history.final(1, _id(1), b"dup")
    history.final(1, _id(2), b"dup")
    with pytest.raises(AssertionError) as raised:
        check(history).raise_if_failed()
    lines = str(raised.value).splitlines()
    assert lines[0] == "the history breaks the write path's guarantees:"
    assert lines[1] == "lost (25):"
    assert lines[2] == "  - b'0' acked at 0@0:0: not in the final state"
    assert lines[21] == "  - b'19' acked at 0@19:0: not in the final state"
    assert lines[22:] == [
        "  ... and 5 more",
        "duplicates (1):",
        "  - b'dup' stored 2 times: 1@1:0, 1@2:0 (never put)",
    ]


def test_threads_record_into_one_history() -> None:
    history = History()

    def produce(partition: int) -> None:
        for sequence in range(500):
            payload = b"%d-%d" % (partition, sequence)
            history.acked(payload, partition, _id(1, sequence), owner="s")
            history.final(partition, _id(1, sequence), payload)
            history.read("scan", partition, _id(1, sequence), payload)

    threads = [threading.Thread(target=produce, args=(partition,)) for partition in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report = check(history)
    assert report.ok
    assert (report.acked, report.reads, report.final_rows) == (2000, 2000, 2000)


# -- random correct runs, and one mutation each ------------------------------------------

_OWNERS = ("sc-a", "sc-b", "sc-c")
_PUTS = ("acked", "retried", "unknown-stored", "unknown-lost")


@dataclass
class _Run:
    """A correct run of the model, in the order it will be recorded; mutations edit
    it in place before :func:`_replay`."""

    acks: list[tuple[bytes, int, MessageId, str | None]] = field(default_factory=list)
    attempts: list[tuple[bytes, int]] = field(default_factory=list)
    final: dict[tuple[int, MessageId], bytes] = field(default_factory=dict)
    # Per reader and partition, the reads in delivered order: (id, payload, redelivery),
    # the first `fresh[key]` of them a plain in-order run.
    reads: dict[tuple[str, int], list[tuple[MessageId, bytes, bool]]] = field(default_factory=dict)
    fresh: dict[tuple[str, int], int] = field(default_factory=dict)
    checkpoints: list[tuple[str, int, MessageId]] = field(default_factory=list)
    # Per partition, its tenures in order: the owner and the indexes of its acks.
    tenures: dict[int, list[tuple[str, list[int]]]] = field(default_factory=dict)
    # How the parties' records interleave: a permutation of the acks' indexes, and one
    # of the readers' keys (each key once per read, taken in order).
    ack_order: list[int] = field(default_factory=list)
    read_order: list[tuple[str, int]] = field(default_factory=list)


def _next_id(draw: st.DrawFn, previous: MessageId) -> MessageId:
    """An id above ``previous`` that leaves an id free between them (for a late row)."""
    if previous.sequence + 3 <= MAX_SEQUENCE and draw(st.booleans()):
        return MessageId(previous.timestamp, previous.sequence + draw(st.integers(2, 3)))
    return MessageId(previous.timestamp + draw(st.integers(1, 2)), draw(st.integers(1, 3)))


@st.composite
def _runs(draw: st.DrawFn) -> _Run:
    """A correct run: partitions whose owners follow one another, each putting with
    increasing ids; readers reading a run of rows in order, some reconnecting and
    reading part again; checkpoints at read positions.

    Partition 0 always has two owners or more, each with two acks or more, and reader
    r0 reads two rows or more of it, so that every mutation applies."""
    run = _Run()
    payloads = iter(b"m%d" % number for number in range(10_000))
    for partition in range(draw(st.integers(1, 3))):
        named = partition == 0 or draw(st.booleans())
        owners = draw(st.permutations(_OWNERS))[: draw(st.integers(2 - min(partition, 1), 3))]
        message_id = MessageId(draw(st.integers(1_700_000_000_000, 1_700_000_009_999)), 1)
        run.tenures[partition] = []
        for owner in owners:
            least = ["acked"] * (2 if partition == 0 else 1)
            puts = draw(st.permutations(least + draw(st.lists(st.sampled_from(_PUTS)))))
            indexes: list[int] = []
            for put in puts:
                payload = next(payloads)
                if put != "acked":
                    run.attempts.append((payload, partition))
                if put == "unknown-lost":
                    continue
                run.final[partition, message_id] = payload
                if put != "unknown-stored":
                    indexes.append(len(run.acks))
                    run.acks.append((payload, partition, message_id, owner if named else None))
                message_id = _next_id(draw, message_id)
            run.tenures[partition].append((owner, indexes))
    for reader in (f"r{number}" for number in range(draw(st.integers(1, 3)))):
        for partition in run.tenures:
            rows = sorted(
                (key[1], payload) for key, payload in run.final.items() if key[0] == partition
            )
            if (reader, partition) == ("r0", 0):
                start, stop = 0, draw(st.integers(2, len(rows)))
            else:
                start = draw(st.integers(0, len(rows)))
                stop = draw(st.integers(start, len(rows)))
            if start == stop:
                continue
            reads = [(message_id, payload, False) for message_id, payload in rows[start:stop]]
            run.fresh[reader, partition] = len(reads)
            for index in sorted(draw(st.sets(st.integers(0, len(reads) - 1), max_size=3))):
                run.checkpoints.append((reader, partition, reads[index][0]))
            if draw(st.booleans()):  # a reconnect: again from a read, on past the last
                again = draw(st.integers(start, stop - 1))
                until = draw(st.integers(stop, len(rows)))
                reads += [(message_id, payload, True) for message_id, payload in rows[again:until]]
            run.reads[reader, partition] = reads
    run.ack_order = draw(st.permutations(range(len(run.acks))))
    run.read_order = draw(st.permutations([key for key, reads in run.reads.items() for _ in reads]))
    return run


def _replay(run: _Run) -> History:
    history = History()
    for payload, partition in run.attempts:
        history.attempted(payload, partition)
    for index in run.ack_order:
        payload, partition, message_id, owner = run.acks[index]
        history.acked(payload, partition, message_id, owner=owner)
    cursors = dict.fromkeys(run.reads, 0)
    for key in run.read_order:
        message_id, payload, redelivery = run.reads[key][cursors[key]]
        cursors[key] += 1
        history.read(key[0], key[1], message_id, payload, redelivery=redelivery)
    for subscription, partition, message_id in run.checkpoints:
        history.checkpoint(subscription, partition, message_id)
    for (partition, message_id), payload in run.final.items():
        history.final(partition, message_id, payload)
    return history


Mutation = Callable[[_Run, Callable[[st.SearchStrategy[Any]], Any]], tuple[str, str]]


def _drop_an_acked_row(run: _Run, draw: Callable[[st.SearchStrategy[Any]], Any]) -> tuple[str, str]:
    payload, partition, message_id, _ = draw(st.sampled_from(run.acks))
    del run.final[partition, message_id]
    return "lost", f"{payload!r} acked at {partition}@{message_id}: not in the final state"


def _store_a_payload_again(
    run: _Run, draw: Callable[[st.SearchStrategy[Any]], Any]
) -> tuple[str, str]:
    (partition, _), payload = draw(st.sampled_from(sorted(run.final.items())))
    top = max(message_id for key, message_id in run.final if key == partition)
    run.final[partition, top.successor()] = payload
    return "duplicates", f"{payload!r} stored 2 times"


def _swap_two_reads(run: _Run, draw: Callable[[st.SearchStrategy[Any]], Any]) -> tuple[str, str]:
    key = draw(st.sampled_from(sorted(key for key, fresh in run.fresh.items() if fresh >= 2)))
    index = draw(st.integers(0, run.fresh[key] - 2))
    reads = run.reads[key]
    reads[index], reads[index + 1] = reads[index + 1], reads[index]
    reader, partition = key
    return "out_of_order", (
        f"{reader} on partition {partition}: read {reads[index + 1][0]} after {reads[index][0]}"
    )


def _show_a_row_late(run: _Run, draw: Callable[[st.SearchStrategy[Any]], Any]) -> tuple[str, str]:
    key = draw(st.sampled_from(sorted(key for key, fresh in run.fresh.items() if fresh >= 2)))
    late = run.reads[key][draw(st.integers(1, run.fresh[key] - 1))][0].predecessor()
    reader, partition = key
    run.final[partition, late] = b"late"
    return "behind_read_position", f"{partition}@{late} (b'late'): {reader} never read it"


def _ack_from_a_deposed_owner(
    run: _Run, draw: Callable[[st.SearchStrategy[Any]], Any]
) -> tuple[str, str]:
    tenures = run.tenures[0]
    later = draw(st.integers(1, len(tenures) - 1))
    earlier_owner = tenures[draw(st.integers(0, later - 1))][0]
    index = draw(st.sampled_from(tenures[later][1][1:]))
    payload, partition, message_id, _ = run.acks[index]
    run.acks[index] = (payload, partition, message_id, earlier_owner)
    return "deposed_acks", f"partition 0: {earlier_owner} acked {message_id} ({payload!r})"


_MUTATIONS: dict[str, Mutation] = {
    "lost": _drop_an_acked_row,
    "duplicates": _store_a_payload_again,
    "out_of_order": _swap_two_reads,
    "behind_read_position": _show_a_row_late,
    "deposed_acks": _ack_from_a_deposed_owner,
}


@settings(max_examples=60, deadline=None)
@given(run=_runs())
def test_a_correct_run_is_ok(run: _Run) -> None:
    report = check(_replay(run))
    report.raise_if_failed()
    assert report.acked == len(run.acks)
    assert report.reads == sum(len(reads) for reads in run.reads.values())
    assert report.final_rows == len(run.final)


@pytest.mark.parametrize("kind", sorted(_MUTATIONS))
@settings(max_examples=30, deadline=None)
@given(run=_runs(), data=st.data())
def test_one_mutation_is_found_as_its_kind(kind: str, run: _Run, data: st.DataObject) -> None:
    found_kind, needle = _MUTATIONS[kind](run, data.draw)
    assert found_kind == kind
    report = check(_replay(run))
    assert set(_flagged(report)) == {kind}, report.table()
    assert any(needle in finding for finding in getattr(report, kind)), (needle, report)
