"""Property-based, streaming: random puts in rounds, a random cap per micro-batch, a
random filter (the batch property test's filters) and a random ``minPartitions``
(micro-batches cut by time into Spark partitions); after each round an
``availableNow`` query continues from the same checkpoint. Every micro-batch must be
within the cap and later, per partition, than the one before, and all micro-batches
together must be the filter applied in Python to what was put: nothing missing,
nothing twice."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spark.conftest import options, store_rows
from tests.spark.test_read_properties import Case, filters
from tests.spark.test_read_queries import BASE

PARTITIONS = 3

# One round: (partition, topic) of each message put; ids follow per partition.
rounds = st.lists(
    st.lists(
        st.tuples(st.integers(0, PARTITIONS - 1), st.sampled_from(["a", "b", "c"])),
        min_size=0,
        max_size=25,
    ),
    min_size=1,
    max_size=2,
)


def _stamp(rounds_drawn: list[list[tuple[int, str]]]) -> list[list[tuple[Any, ...]]]:
    """Give each message an id: round r's are in milliseconds BASE+10r .. BASE+10r+9,
    three sequences per millisecond, increasing per partition."""
    out = []
    for r, messages in enumerate(rounds_drawn):
        seen: Counter[int] = Counter()
        stamped = []
        for p, topic in messages:
            c = seen[p]
            seen[p] += 1
            stamped.append((p, BASE + 10 * r + c // 3, c % 3, topic, f"r{r}-{p}-{c}".encode()))
        out.append(stamped)
    return out


def test_random_micro_batches_match_what_was_put(spark, hbase_server, hq, queue_name, tmp_path):
    example = iter(range(1000))

    @settings(
        max_examples=4,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        drawn=rounds,
        cap=st.one_of(st.none(), st.integers(1, 7)),
        case=st.one_of(st.none(), filters),
        cut=st.one_of(st.none(), st.integers(2, 8)),
    )
    def check(
        drawn: list[list[tuple[int, str]]], cap: int | None, case: Case | None, cut: int | None
    ) -> None:
        n = next(example)
        queue = f"{queue_name}s{n}"
        hq.create_queue(queue, partitions=PARTITIONS)
        put: list[tuple[Any, ...]] = []
        batches: list[list[tuple[int, str]]] = []

        def collect(batch: Any, batch_id: int) -> None:
            batches.append([(r.partition, r.id) for r in batch.collect()])

        for stamped in _stamp(drawn):
            store_rows(hbase_server, hq, queue, stamped)
            put.extend(stamped)
            stream = spark.readStream.format("hqueue").options(**options(hbase_server, queue))
            if cap is not None:
                stream = stream.option("maxMessagesPerTrigger", str(cap))
            if cut is not None:
                stream = stream.option("minPartitions", str(cut))
            df = stream.load()
            if case is not None:
                df = df.filter(case[0])
            query = (
                df.writeStream.foreachBatch(collect)
                .option("checkpointLocation", str(tmp_path / f"checkpoint{n}"))
                .trigger(availableNow=True)
                .start()
            )
            assert query.awaitTermination(120)
            assert query.exception() is None

        pred = case[1] if case is not None else (lambda m: True)
        expected = Counter((m[0], f"{m[1]}:{m[2]}") for m in put if pred(m) is True)
        got = Counter(key for batch in batches for key in batch)
        assert got == expected, case[2] if case is not None else "no filter"
        last: dict[int, tuple[int, int]] = {}
        for batch in batches:
            if cap is not None:
                assert len(batch) <= cap
            for p in {p for p, _ in batch}:
                ids = [tuple(map(int, i.split(":"))) for q, i in batch if q == p]
                assert min(ids) > last.get(p, (0, 0))
                last[p] = max(ids)

    check()
