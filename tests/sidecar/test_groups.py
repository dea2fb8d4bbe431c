"""Subscriber groups, with metadata in HBase and in ZooKeeper: members share a
subscription's partitions, each partition delivered to one member at a time, and
rebalanced as members join, leave and die (``kill -9``), with nothing lost."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from click.testing import CliRunner

from hqueue import Message, Position
from hqueue.cli.main import cli
from hqueue.client.client import Queue
from hqueue.settings import ENV_TABLE_PREFIX
from hqueue.testing import internals
from hqueue.testing.cluster import SESSION, Cluster, wait_for
from hqueue.testing.subscriber import SubscriberProcess
from tests.sidecar.conftest import ALSO_ON_REAL_HBASE


class Recorder:
    """A member's listener: records, per batch, the member, the group generation it
    knew, the partition, the messages, and when the call began and ended."""

    def __init__(self, log: list[tuple[str, int, int, list[Position], float, float]]) -> None:
        self.log = log
        self.lock = threading.Lock()
        self.subscriber: object = None

    def __call__(self, messages: list[Message]) -> None:
        began = time.monotonic()
        time.sleep(0.002)  # a listener that takes a moment, so overlaps could show
        view = self.subscriber.assignment  # type: ignore[attr-defined]
        ended = time.monotonic()
        with self.lock:
            self.log.append(
                (
                    self.subscriber.member,  # type: ignore[attr-defined]
                    view.generation,
                    messages[0].partition,
                    [m.position for m in messages],
                    began,
                    ended,
                )
            )


def _join(queue: Queue, member: str, log: list) -> object:
    recorder = Recorder(log)
    sub = queue.subscribe("g", recorder, group=True, member=member, start="earliest")
    recorder.subscriber = sub
    return sub


def _no_overlap(log: list[tuple[str, int, int, list[Position], float, float]]) -> None:
    """No partition was in two members' listeners at once."""
    by_partition: dict[int, list[tuple[float, float, str, int]]] = defaultdict(list)
    for member, generation, partition, _, began, ended in log:
        by_partition[partition].append((began, ended, member, generation))
    for partition, calls in by_partition.items():
        calls.sort()
        ended: dict[str, float] = {}  # the latest end of each member's calls so far
        for began, end, member, _ in calls:
            for other, other_end in ended.items():
                assert other == member or other_end <= began, (
                    f"partition {partition}: {other} and {member} at once"
                )
            ended[member] = max(end, ended.get(member, end))


@ALSO_ON_REAL_HBASE
def test_members_share_the_partitions_and_rebalance_as_they_come_and_go(
    any_cluster: Cluster,
) -> None:
    cluster = any_cluster
    cluster.in_process()
    client = cluster.client()
    client.create_queue("q", partitions=12)
    queue = client.queue("q")
    log: list[tuple[str, int, int, list[Position], float, float]] = []
    members = {name: _join(cluster.client().queue("q"), name, log) for name in ("a", "b", "c")}

    def shares() -> dict[str, frozenset[int]]:
        return {n: s.assignment.partitions for n, s in members.items()}  # type: ignore[attr-defined]

    def balanced() -> bool:
        views = [s.assignment for s in members.values()]  # type: ignore[attr-defined]
        parts = [v.partitions for v in views]
        return (
            len({v.generation for v in views}) == 1
            and sorted(itertools.chain.from_iterable(parts)) == list(range(12))
            and max(map(len, parts)) - min(map(len, parts)) <= 1
        )

    wait_for(balanced, 20, "three members to share 12 partitions")
    assert sorted(len(p) for p in shares().values()) == [4, 4, 4]
    written = queue.put_batch([(b"x%d" % i, "t", i % 12) for i in range(3_000)])

    def delivered() -> set[Position]:
        return {p for entry in list(log) for p in entry[3]}

    wait_for(lambda: delivered() >= set(written), 60, "every message")
    # Each partition went to the member the assignment gives it, once.
    owner = {p: n for n, parts in shares().items() for p in parts}
    for member, _, partition, _, _, _ in log:
        assert owner[partition] == member
    assert Counter(p for entry in log for p in entry[3]).most_common(1)[0][1] == 1

    # A fourth member joins while messages flow, then one leaves: all delivered, none
    # in two listeners at once.
    members["d"] = _join(cluster.client().queue("q"), "d", log)
    more = []
    for i in range(20):
        more += queue.put_batch([(b"y%d-%d" % (i, j), "t", j % 12) for j in range(120)])
        if i == 10:
            members.pop("b").close()  # type: ignore[attr-defined]
    wait_for(balanced, 30, "three members to rebalance")
    assert sorted(len(p) for p in shares().values()) == [4, 4, 4]
    wait_for(lambda: delivered() >= set(written) | set(more), 60, "every message after")
    _no_overlap(log)
    # The CLI shows each member with its partitions and the generation.
    info = {s.name: s for s in queue.subscriptions()}["g"]
    assert info.group is not None
    assert {m.member for m in info.group.members} == {"a", "c", "d"}
    result = CliRunner().invoke(
        cli,
        [
            "--hbase",
            cluster.storage.address,
            *(["--zookeeper", cluster.zookeeper] if cluster.zookeeper else []),
            "subscriptions",
            "describe",
            "q",
            "g",
        ],
        env={ENV_TABLE_PREFIX: cluster.prefix},
    )
    assert result.exit_code == 0, result.output
    assert f"generation {info.group.generation}" in result.output
    for m in info.group.members:
        assert f"member {m.member} at {m.address}" in result.output
    for sub in members.values():
        sub.close()  # type: ignore[attr-defined]


def _member(cluster: Cluster, name: str) -> SubscriberProcess:
    return SubscriberProcess(
        cluster.storage.address,
        cluster.tmp / f"{name}.jsonl",
        cluster.tmp / f"{name}.log",
        "q",
        "g",
        "--group",
        "--member",
        name,
        "--from",
        "earliest",
        "--session-timeout",
        str(SESSION),
        zookeeper=cluster.zookeeper,
        table_prefix=cluster.prefix,
    ).start()


def _deliveries(path: Path) -> list[tuple[str, Position]]:
    out = []
    for line in path.read_text().splitlines(keepends=True):
        if not line.endswith("\n"):
            break  # cut off by the kill
        record = json.loads(line)
        out.append((record["member"], Position.parse(f"{record['partition']}@{record['id']}")))
    return out


def test_a_member_killed_mid_stream_loses_nothing(any_cluster: Cluster) -> None:
    cluster = any_cluster
    cluster.process()
    client = cluster.client()
    client.create_queue("q", partitions=12)
    queue = client.queue("q")
    members = {name: _member(cluster, name) for name in ("a", "b", "c")}
    written: list[Position] = []
    for i in range(30):
        written += queue.put_batch([(b"m%d-%d" % (i, j), "t", j % 12) for j in range(1_000)])
        if i == 10:
            members["b"].kill()
        if i == 20:
            members["d"] = _member(cluster, "d")
    files = {name: cluster.tmp / f"{name}.jsonl" for name in members}

    def received() -> list[tuple[str, Position]]:
        return [d for path in files.values() for d in _deliveries(path)]

    wait_for(lambda: {p for _, p in received()} >= set(written), 120, "every message")

    def shares() -> dict[str, int]:
        group = {s.name: s for s in queue.subscriptions()}["g"].group
        assert group is not None
        return {m.member: len(m.partitions) for m in group.members}

    # The dead member's entry went with its session; the three live ones share evenly.
    wait_for(lambda: shares() == {"a": 4, "c": 4, "d": 4}, 30, "a balanced group")
    deliveries = received()
    # Per partition, in id order: the members that had it follow one another (a
    # partition never comes back to a member that lost it here), and only what was
    # in flight when it moved (at most a batch) came twice.
    by_partition: dict[int, list[tuple[Position, str]]] = defaultdict(list)
    for member, position in deliveries:
        by_partition[position.partition].append((position, member))
    for partition, got in by_partition.items():
        got.sort()
        twice = [p for p, n in Counter(p for p, _ in got).items() if n > 1]
        runs = [m for m, _ in itertools.groupby(m for p, m in got if p not in set(twice))]
        assert len(runs) == len(set(runs)), f"partition {partition} went back: {runs}"
        assert len(twice) <= 1_000 * max(0, len(runs) - 1), f"partition {partition}"
    for name in ("a", "c", "d"):
        members[name].stop()


def test_a_sidecar_killed_after_a_dead_letter_before_its_checkpoint_loses_nothing(
    any_cluster: Cluster,
) -> None:
    cluster = any_cluster
    # Checkpoints a minute apart: the kill lands between the dead letter and them.
    first = cluster.process("--checkpoint-interval", "60")
    client = cluster.client()
    client.create_queue("q", partitions=1)
    queue = client.queue("q")
    taken: list[bytes] = []

    def listener(messages: list[Message]) -> None:
        if any(m.value == b"bad" for m in messages):
            raise ValueError("bad message")
        taken.extend(m.value for m in messages)

    sub = queue.subscribe("s", listener, max_redeliveries=1, retry_backoff=0.01)
    queue.put_batch([b"ok1", b"bad", b"ok2"], topic="t")
    wait_for(lambda: sub.dead_lettered == 1 and taken == [b"ok1", b"ok2"], 30, "a dead letter")
    first.kill()
    state = internals.subscriptions(client).read_subscription_state("q", "s").value
    assert state == {}, "the checkpoint was written before the kill"
    sub.close()
    # A new sidecar and a new subscriber (which remembers nothing) start over from
    # the last checkpoint: the dead letter is written again, nothing is lost.
    cluster.process()
    taken.clear()
    with queue.subscribe("s", listener) as again:
        wait_for(lambda: again.dead_lettered == 1 and taken == [b"ok1", b"ok2"], 60, "redelivery")
    letters = [letter.value for letter in queue.dead_letters("s")]
    assert letters == [b"bad", b"bad"]
