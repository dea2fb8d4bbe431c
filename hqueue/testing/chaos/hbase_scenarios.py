"""The fault scenarios on real Apache HBase (:class:`~hqueue.testing.chaos.hbase_rig.
HBaseRig`: a region server, its Thrift1 gateway and a sidecar beside it on each of
two test hosts, the WAL in HDFS): a region server killed, a region server frozen past
its ZooKeeper session, a region moved and another split, each while producers put
to every partition and a reader tails them (:mod:`hqueue.testing.chaos.workload`),
checked as the other scenarios are (:mod:`hqueue.testing.chaos.scenarios`).

Each measures its failover: when HBase serves the partition's region elsewhere, when
its ownership has followed (the partition owned by the sidecar beside its new region
server), and how long puts to it stalled (the longest gap between acknowledgements of
a probe putting to it one put after another).

Each scenario runs on a queue of its own, on the rig it is given (one cluster for
several scenarios) or on one of its own; a region server it kills, or that aborts,
is restarted before it returns, so the next scenario finds the cluster whole."""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from hqueue.errors import HQueueError
from hqueue.message import encode_rowkey, partition_end, partition_prefix
from hqueue.testing.chaos.hbase_rig import HBaseRig
from hqueue.testing.chaos.scenarios import SMALL, Outcome, Size, _Run
from hqueue.testing.process import wait_for

__all__ = [
    "HBASE_SCENARIOS",
    "MEDIUM",
    "region_move_split",
    "regionserver_freeze",
    "regionserver_kill",
]

MEDIUM = Size("medium", partitions=8, producers=4, puts=500, repeats=2)
"""Between :data:`~hqueue.testing.chaos.scenarios.SMALL` and ``FULL``: a region
server's failover takes half a minute and a restart as long, so ``FULL``'s five
repeats of each take most of an hour."""

FREEZE_SECONDS = 15.0
"""How long a region server is frozen: past its 10 s ZooKeeper session."""


@contextlib.contextmanager
def _rig_for(rig: HBaseRig | None, work_dir: Path | None) -> Iterator[HBaseRig]:
    """``rig`` as it is, else a rig of its own for the scenario."""
    if rig is not None:
        yield rig
    else:
        with HBaseRig(work_dir) as own:
            yield own


_PROBES = itertools.count()


class _Probe:
    """A thread putting to one partition, one put after another, until stopped,
    recording each in the run's history; :meth:`stall` is the longest time between
    two acknowledgements (or from :meth:`start` to the first)."""

    def __init__(self, run: _Run, partition: int) -> None:
        self._queue = run.client.queue(run.queue)
        self._history = run.history
        self._partition = partition
        self._stopping = threading.Event()
        self._acks: list[float] = []
        self.failed = 0
        self._serial = next(_PROBES)  # payloads unique across a run's probes
        self._thread = threading.Thread(target=self._run, daemon=True, name="probe")

    def start(self) -> _Probe:
        self._acks.append(time.monotonic())
        self._thread.start()
        return self

    def _run(self) -> None:
        n = 0
        while not self._stopping.is_set():
            payload = f"probe{self._serial}-{n}".encode()
            n += 1
            try:
                position = self._queue.put(payload, topic="t", partition=self._partition)
            except HQueueError:
                self._history.attempted(payload, self._partition)
                self.failed += 1
                continue
            self._history.acked(payload, position.partition, position.id)
            self._acks.append(time.monotonic())

    def stop(self, timeout: float = 120.0) -> float:
        """Stop; return the longest stall (seconds)."""
        self._stopping.set()
        self._thread.join(timeout)
        acks = [*self._acks, time.monotonic()]
        return max(b - a for a, b in itertools.pairwise(acks))


def _poll(what: Callable[[], bool]) -> bool:
    """``what()``, false while the cluster cannot say (a region of hbase:meta moving)."""
    try:
        return what()
    except HQueueError:
        return False


def _move(run: _Run, rig: HBaseRig, partition: int, row: bytes, server: int) -> tuple[float, float]:
    """Move the region holding ``row`` (of ``partition``) to region server ``server``
    (an admin call, in a thread) and wait until the sidecar beside it owns
    ``partition``; return the seconds from the call to the region served there, and
    from then to the ownership following it."""
    assert rig.hbase is not None
    hbase = rig.hbase
    failed: list[BaseException] = []

    def call() -> None:
        try:
            hbase.admin("move", table, row.hex(), str(rig.region_server_port(server)))
        except BaseException as exc:
            failed.append(exc)

    table = run.client.describe_queue(run.queue).table
    mover = threading.Thread(target=call, daemon=True, name="admin-move")
    mover.start()
    moved = wait_for(
        lambda: _poll(lambda: rig.server(run.client, run.queue, partition) == server),
        200,
        f"partition {partition}'s region served by region server {server}",
        step=0.1,
    )
    followed = wait_for(
        lambda: _poll(lambda: rig.placement(run.client, run.queue, partition) == (server, server)),
        60,
        f"partition {partition} owned beside region server {server}",
        step=0.1,
    )
    mover.join(200)
    if failed:
        raise failed[0]
    return moved, followed


_RUNS = itertools.count()


def _queue(name: str) -> str:
    """A queue name of its own for a run of scenario ``name`` (a rig may run a
    scenario more than once)."""
    return f"{name}_{next(_RUNS)}"


def _since(began: float) -> float:
    return time.monotonic() - began


def _joined(values: list[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in values)


def _fail_over(
    run: _Run,
    rig: HBaseRig,
    victim: int,
    began: float,
    hold: float = 0.0,
    then: Callable[[], None] | None = None,
) -> tuple[float, float]:
    """Wait until partition 0's region is served by a region server other than
    ``victim`` and then owned beside it; return the seconds from ``began`` to each.
    After ``hold`` seconds from ``began``, ``then`` is called (once), whether or not
    that happened yet; the wait ends only after it."""
    moved: float | None = None
    followed: float | None = None
    deadline = began + 180
    while followed is None or then is not None:
        now = time.monotonic()
        if then is not None and now - began >= hold:
            then()
            then = None
        if followed is None:
            try:
                server, owner = rig.placement(run.client, run.queue, 0)
            except HQueueError:
                server = owner = None
            if moved is None and server not in (None, victim):
                moved = now - began
            if moved is not None and server not in (None, victim) and owner == server:
                followed = now - began
        if now > deadline:
            raise AssertionError(
                f"partition 0 not served and owned beside another region server than "
                f"{victim} within 180 s (region moved: {moved})"
            )
        time.sleep(0.1)
    assert moved is not None
    return moved, followed


_Fault = Callable[[_Run, HBaseRig, int, float], tuple[float, float, str | None]]
"""A fault on region server ``victim`` (an index), begun at ``began`` (monotonic):
returns once its regions are served elsewhere and owned beside them, with
:func:`_fail_over`'s two figures and one of the fault's own (or ``None``)."""


def _region_server_faults(run: _Run, rig: HBaseRig, what: str, fault: _Fault) -> list[str]:
    """``size.repeats`` times: the load, ``fault`` on the region server serving
    partition 0 with a probe putting to it, the load after the failover, the server
    restarted, the load again. Put the failover's figures in ``run.figures``; return
    the fault's own figures."""
    assert rig.hbase is not None
    moved, followed, stalls, own = [], [], [], []
    for _ in range(run.size.repeats):
        run.progress(f"before the {what}")
        victim = rig.server(run.client, run.queue, 0)
        assert victim is not None
        probe = _Probe(run, 0).start()
        region, owned, figure = fault(run, rig, victim, time.monotonic())
        moved.append(region)
        followed.append(owned)
        if figure is not None:
            own.append(figure)
        run.progress("after the failover")
        stalls.append(probe.stop())
        rig.restart_region_server(victim)
        run.progress("after the restart")
    run.figures["region served elsewhere (s)"] = _joined(moved)
    run.figures["owned beside it (s)"] = _joined(followed)
    run.figures["puts to partition 0 stalled (s)"] = _joined(stalls)
    return own


def _kill(run: _Run, rig: HBaseRig, victim: int, began: float) -> tuple[float, float, None]:
    assert rig.hbase is not None
    rig.hbase.roles[f"regionserver{victim}"].kill()
    return (*_fail_over(run, rig, victim, began), None)


def _freeze(run: _Run, rig: HBaseRig, victim: int, began: float) -> tuple[float, float, str]:
    """SIGSTOP for :data:`FREEZE_SECONDS`, SIGCONT, and the server's abort awaited;
    the fault's figure: the seconds from SIGSTOP to its exit (``no``: none within two
    minutes of SIGCONT)."""
    assert rig.hbase is not None
    role = rig.hbase.roles[f"regionserver{victim}"]
    role.pause()
    try:
        region, owned = _fail_over(run, rig, victim, began, FREEZE_SECONDS, role.resume)
    finally:
        role.resume()
    proc = role.proc
    assert proc is not None
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        return region, owned, "no"
    return region, owned, f"{_since(began):.1f}"


def regionserver_kill(
    size: Size = SMALL, work_dir: Path | None = None, rig: HBaseRig | None = None
) -> Outcome:
    """``kill -9`` of the region server serving partition 0 while producers put and a
    reader tails: HBase reassigns its regions after its ZooKeeper session (10 s)
    expires and replays its WAL from HDFS, ownership of its partitions follows the
    regions to the sidecar beside the other region server, and nothing acknowledged
    is lost. Then the region server is restarted (it serves no region until moved)."""
    with _rig_for(rig, work_dir) as rig:
        run = _Run(rig, size, _queue("rs_kill"))
        _region_server_faults(run, rig, "kill", _kill)
        return run.finish("regionserver-kill")


def regionserver_freeze(
    size: Size = SMALL, work_dir: Path | None = None, rig: HBaseRig | None = None
) -> Outcome:
    """SIGSTOP of the region server serving partition 0 for 15 s, past its ZooKeeper
    session, while producers put and a reader tails: HBase reassigns its regions while
    it is frozen; on SIGCONT it finds itself declared dead and aborts. Nothing
    acknowledged is lost, and nothing it held lands late behind what the reader read
    (the final scan is after its abort and restart)."""
    with _rig_for(rig, work_dir) as rig:
        run = _Run(rig, size, _queue("rs_freeze"))
        aborted = _region_server_faults(run, rig, "freeze", _freeze)
        run.figures["aborted after SIGCONT (s from SIGSTOP)"] = ", ".join(aborted)
        return run.finish("regionserver-freeze")


def region_move_split(
    size: Size = SMALL, work_dir: Path | None = None, rig: HBaseRig | None = None
) -> Outcome:
    """Under load, an admin moves partition 0's region to the other region server,
    and splits the last partition's region (the one before it at the next repeat) at
    its newest id and moves the upper daughter (the partition's newest rows, and so
    its writes) to the other region server: each partition's ownership follows its
    newest rows; nothing is lost, duplicated or reordered, the lower daughter's rows
    are still read."""
    with _rig_for(rig, work_dir) as rig:
        assert rig.hbase is not None
        hbase = rig.hbase
        run = _Run(rig, size, _queue("move_split"))
        table = run.client.describe_queue(run.queue).table
        moves, split_took, split_moves = [], [], []
        for repeat in range(size.repeats):
            last = size.partitions - 1 - repeat  # a region just split is not split again
            run.progress("before the move")
            source = rig.server(run.client, run.queue, 0)
            assert source is not None
            target = 1 - source
            probe = _Probe(run, 0).start()
            moved, followed = _move(run, rig, 0, partition_prefix(0), target)
            moves.append(f"{moved:.1f} + {followed:.1f} (stall {probe.stop():.1f})")
            run.progress("after the move")

            probe = _Probe(run, last).start()
            marker = f"split {last} here".encode()
            at = run.client.queue(run.queue).put(marker, topic="t", partition=last)
            run.history.acked(marker, at.partition, at.id)
            began = time.monotonic()
            hbase.admin("split", table, encode_rowkey(last, at.id).hex())
            split_took.append(_since(began))
            source = rig.server(run.client, run.queue, last)
            assert source is not None
            target = 1 - source
            moved, followed = _move(run, rig, last, partition_end(last), target)
            split_moves.append(f"{moved:.1f} + {followed:.1f} (stall {probe.stop():.1f})")
            run.progress("after the split")
        # "a + b (stall c)": the region served there a s after the admin call began (a
        # JVM's start included), owned beside it b s later; puts to it stalled c s.
        run.figures["move partition 0: moved + followed (s)"] = ", ".join(moves)
        run.figures["split call (s)"] = _joined(split_took)
        run.figures["move upper daughter: moved + followed (s)"] = ", ".join(split_moves)
        return run.finish("region-move-split")


HBASE_SCENARIOS: dict[str, Callable[[Size, Path | None], Outcome]] = {
    "regionserver-kill": regionserver_kill,
    "regionserver-freeze": regionserver_freeze,
    "region-move-split": region_move_split,
}
"""The real-HBase scenarios by name, as ``python -m hqueue.testing.chaos NAME`` runs
them (each on a cluster of its own)."""
