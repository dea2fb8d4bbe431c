"""Dropping a table of the ZooKeeper backend while another client adds keys to it, as
the sidecars do to a queue being deleted (a checkpoint written, a partition taken):
ZooKeeper refuses to delete a znode that gained a child after its children were
listed, and the drop deletes the newcomers and tries again. On the real ZooKeeper of
the test session."""

from __future__ import annotations

import threading
from typing import Any

from kazoo.protocol.states import WatchedEvent

from hqueue.metadata.backends.zookeeper.metastore import ZooKeeperMetaStore
from tests.metadata.conftest import Backend

_KEYS = 300
"""Keys the drop deletes after the first one, each a round trip: the late child's
create, sent when the first is deleted, lands well before the drop reaches the
table's own znode."""


def test_drop_table_deletes_children_created_while_it_runs(zk_backend: Backend) -> None:
    dropper = zk_backend.open()
    other = zk_backend.open()
    assert isinstance(dropper, ZooKeeperMetaStore) and isinstance(other, ZooKeeperMetaStore)
    dropper.create_table("queue/q")
    path = dropper.table_path("queue/q")
    kazoo = other.client
    for i in range(_KEYS):
        kazoo.create(f"{path}/checkpoints/{i:04}", b"1:0", makepath=True)

    created = threading.Event()
    outcome: list[Any] = []

    def add_late_child(event: WatchedEvent) -> None:
        # The first key is gone: the drop listed the table's children already.
        def done(result: Any) -> None:
            try:
                outcome.append(result.get())
            except Exception as exc:  # the test asserts which
                outcome.append(exc)
            created.set()

        kazoo.create_async(f"{path}/owners", b"").rawlink(done)

    assert kazoo.exists(f"{path}/checkpoints/0000", watch=add_late_child)
    dropper.drop_table("queue/q")

    assert created.wait(10)
    assert outcome == [f"{path}/owners"]  # it was created before the table's delete
    assert kazoo.exists(path) is None
