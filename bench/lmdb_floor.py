"""The floor of a read from the embedded server's store: py-lmdb's bare cursor loop.

:func:`cursor_floor` opens a ``hqueue standalone`` data directory read-only beside the
running server (LMDB lets several processes read one environment) and steps a cursor
over every stored row, keeping each key and value as the server's bulk read
(``Store.raw_rows``) does, with nothing else per row. Every row of the store counts:
``bench_spark.py`` takes it once the raw queue is loaded, before anything else is. Its
CPU per row is what any read of this store pays before the first byte of an answer is
built: ``bench_spark.py`` holds the embedded server's CPU per row read by Spark
against it.
"""

from __future__ import annotations

import time
from pathlib import Path

import lmdb

from hqueue.standalone.server import DEFAULT_MAP_SIZE

__all__ = ["cursor_floor"]


def cursor_floor(data_dir: Path, repeat: int) -> tuple[int, float]:
    """Step a cursor over every row of the store in ``data_dir`` ``repeat`` times;
    return the rows and the least CPU seconds (this thread's) one pass took."""
    # The server's map size: a reader's map must cover the file as the server grows
    # it (py-lmdb's default would fail the next transaction once it did).
    env = lmdb.open(
        str(data_dir), readonly=True, map_size=DEFAULT_MAP_SIZE, max_dbs=4, max_readers=1024
    )
    try:
        data = env.open_db(b"data", create=False)
        best = float("inf")
        rows = 0
        for _ in range(max(1, repeat)):
            keys: list[bytes] = []
            raws: list[bytes] = []
            add_key, add_raw = keys.append, raws.append
            began = time.thread_time()
            with env.begin(db=data) as txn:
                for key, raw in txn.cursor().iternext():
                    add_key(key)
                    add_raw(raw)
            best = min(best, time.thread_time() - began)
            rows = len(keys)
        return rows, best
    finally:
        env.close()
