"""A plain scan's wire bytes (``Scanner.next_wire``: stored rows sent as they are, their
headers parsed with NumPy for a whole batch) against thriftpy2's generic encoding of
the ``TRowResult`` objects the decoding path (``Scanner.next_rows``) gives for the
same rows: byte for byte, for random rows of random shapes (message rows, several
columns and families, older versions, keys of any length, cells past the family's
TTL or a TTL of their own), read in calls of random sizes."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from thriftpy2.protocol.cybin import TCyBinaryProtocol
from thriftpy2.transport.memory import TCyMemoryBuffer

from hqueue.standalone.engine.cursors import Scanner, ScanSpec
from hqueue.standalone.engine.schema import FamilyOptions, Mutation, RowMutation
from hqueue.standalone.engine.store import Store
from hqueue.wire.idl import hbase1

H = hbase1()
FAMILIES = {
    b"message": FamilyOptions(max_versions=1),
    b"cf": FamilyOptions(max_versions=3),
    b"ttl": FamilyOptions(time_to_live=60),
}
_tables = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store(Path(tmp_path_factory.mktemp("wire")) / "store", map_size=256 << 20)
    yield s
    s.close()


def thriftpy2_encoded(rows: list[tuple[bytes, list[tuple[bytes, int, bytes]]]]) -> bytes:
    """Return the ``TRowResult`` structs of decoded rows as thriftpy2 writes them."""
    buf = TCyMemoryBuffer()
    proto = TCyBinaryProtocol(buf)
    for row, cells in rows:
        columns = {c: H.TCell(value=v, timestamp=t) for c, t, v in cells}
        proto.write_struct(H.TRowResult(row=row, columns=columns))
    return bytes(buf.getvalue())


now = time.time_ns() // 1_000_000
keys = st.one_of(st.binary(min_size=12, max_size=12), st.binary(min_size=1, max_size=20))
columns = st.sampled_from([b"message:a", b"message:topic", b"message:", b"cf:x", b"cf:y", b"ttl:z"])
# Now, in the future, or long past the ttl family's 60 s and a cell's TTL of 30 s (far
# enough from either that no cell expires while an example runs).
stamps = st.one_of(
    st.just(None), st.integers(now - 10_000_000, now - 100_000), st.just(now + 60_000)
)
puts = st.lists(st.tuples(columns, st.binary(max_size=30), stamps), min_size=1, max_size=4)
writes = st.lists(st.tuples(keys, puts, st.sampled_from([None, 30_000, 10**10])), max_size=30)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(written=writes, limits=st.lists(st.integers(1, 12), min_size=1, max_size=5))
def test_a_plain_scan_sends_what_thriftpy2_would(
    store: Store, written: list[tuple[bytes, list[Any], int | None]], limits: list[int]
) -> None:
    table = b"wire%d" % next(_tables)
    store.create_table(table, FAMILIES)
    for key, cells, ttl in written:
        for column, value, ts in cells:
            # One call per cell: each may carry its own timestamp (versions) and TTL.
            store.mutate_rows(table, [RowMutation(key, [Mutation(column, value)])], ts, (), ttl)
    sent = Scanner(store, table, ScanSpec())
    decoded = Scanner(store, table, ScanSpec())
    assert sent.plain
    for limit in itertools.cycle(limits):
        got = sent.next_wire(limit)
        want = decoded.next_rows(limit)
        assert b"".join(got) == thriftpy2_encoded(want)
        assert len(got) == len(want)
        if not want:
            break
    store.set_enabled(table, False)
    store.delete_table(table)
