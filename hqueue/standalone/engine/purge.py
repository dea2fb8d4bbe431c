"""The TTL purge: HBase's major compaction of one table, in chunks.

Expired cells are invisible to every read at once (the visibility rules of
:mod:`~hqueue.standalone.engine.schema`); :meth:`Purge.purge` removes them from
disk later, with the versions beyond each family's ``max_versions``, without
holding up other writers: the rows to change are found in read transactions, and
each chunk of them is rewritten in its own write transaction of bounded work
(:data:`~hqueue.standalone.engine.reclaim.CHUNK_SECONDS`), then the purge pauses
(:data:`~hqueue.standalone.engine.reclaim.PAUSE_SECONDS`), as the reclaim of a
dropped table does. Not public API.
"""

from __future__ import annotations

import time

import lmdb

from hqueue.errors import TableNotFoundError
from hqueue.standalone.engine.cells import decode_row, encode_cells, family_of, single_cell
from hqueue.standalone.engine.reads import Reads
from hqueue.standalone.engine.reclaim import CHUNK_SECONDS, PAUSE_SECONDS
from hqueue.standalone.engine.rows import trim
from hqueue.standalone.engine.schema import TableDescriptor, now_ms
from hqueue.standalone.engine.state import StorePart, StoreState

__all__ = ["Purge"]


class Purge(StorePart):
    """The TTL purge of a store.

    :param state: the store's environment and schema.
    :param reads: the store's reads, which find the rows to change.
    """

    def __init__(self, state: StoreState, reads: Reads) -> None:
        super().__init__(state)
        self._reads = reads

    def purge(self, name: bytes, batch_rows: int = 1000) -> int:
        """Remove expired cells (past the family's TTL or their own), versions beyond
        ``max_versions`` and the cells of families being dropped (a major compaction).

        Runs in chunks, each its own write transaction, of at most ``batch_rows`` rows
        to change and a few milliseconds of work, pausing between them, so that other
        writes never wait long behind it; rows with nothing to remove are found in
        read transactions, which hold up no writer. A one-cell row (a queue's
        message) is judged from its header, without decoding it. Return how many
        rows were rewritten or removed. A table dropped meanwhile ends the purge.

        :raises TableNotFoundError: no such table.
        """
        desc = self._state.describe(name)
        changed = 0
        after: bytes | None = None
        while True:
            if self._state.current(desc) is None:
                return changed
            cutoffs = desc.ttl_cutoffs(now_ms())
            chunk: list[bytes] = []
            scanned: bytes | None = None
            rows = self._reads.iter_raw(desc, b"", b"", after=after)
            try:
                for n, (row, raw) in enumerate(rows):
                    scanned = row
                    if _purge_verdict(desc, cutoffs, raw) is not False:
                        chunk.append(row)
                    if len(chunk) >= batch_rows or n >= 20 * batch_rows:
                        break
            except TableNotFoundError:
                return changed  # dropped meanwhile: its rows are reclaimed apart
            finally:
                rows.close()
            if scanned is None:
                return changed
            if not chunk:
                after = scanned
                continue

            def rewrite(txn: lmdb.Transaction, keys: list[bytes] = chunk) -> tuple[int, int]:
                # Return the rows changed and the rows looked at (the chunk stops at
                # its deadline; the next one starts after the last row looked at).
                current = self._state.current(desc)
                if current is None:
                    return 0, len(keys)
                now = now_ms()
                cutoffs = current.ttl_cutoffs(now)
                data = self._state.data
                deadline = time.perf_counter() + CHUNK_SECONDS
                n = 0
                for seen, row in enumerate(keys):
                    if seen % 64 == 63 and time.perf_counter() >= deadline:
                        return n, seen
                    key = current.prefix + row
                    raw = txn.get(key, db=data)
                    if raw is None:
                        continue
                    verdict = _purge_verdict(current, cutoffs, raw)
                    if verdict is False:
                        continue
                    if verdict:
                        n += 1
                        txn.delete(key, db=data)
                        continue
                    cells, ttls, expired = decode_row(bytes(raw), now)
                    kept = trim(current, cells, cutoffs)
                    if expired or len(kept) != len(cells):
                        n += 1
                        if kept:
                            txn.put(key, encode_cells(kept, ttls), db=data)
                        else:
                            txn.delete(key, db=data)
                return n, len(keys)

            done, seen = self._state.committer.submit(rewrite)
            changed += done
            after = chunk[seen - 1] if seen < len(chunk) else scanned
            # Let other threads write (and take the interpreter) before the next chunk.
            time.sleep(PAUSE_SECONDS)


def _purge_verdict(
    desc: TableDescriptor, cutoffs: dict[bytes, int], raw: bytes | memoryview
) -> bool | None:
    """Return what a purge does with a stored row, when its header tells: True, delete
    it (its one cell expired, or its family is gone); False, nothing (its one cell
    stays). None: the row has several cells, or cells with a TTL of their own: decode
    it to know."""
    single = single_cell(raw)
    if single is None:
        return None
    column, ts = single
    family = family_of(column)
    if family not in desc.families:
        return True
    cutoff = cutoffs.get(family)
    return cutoff is not None and ts < cutoff
