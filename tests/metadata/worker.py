"""A store in a separate process, for tests that need several processes.

Run as ``python -m tests.metadata.worker SPEC`` (SPEC: the backend's JSON spec). It
prints ``["ready"]``, then reads one JSON command per line and answers
``["ok", result]`` or ``["error", "ExceptionName"]``:

- ``["get", table, key]`` -> ``[value, version number]``
- ``["put", table, key, value, version number or "new"/"any", ephemeral]`` ->
  ``{"version": n, "time": wall-clock seconds after the write returned}``
- ``["remove", table, key]`` -> ``{"time": wall-clock seconds after it returned}``
- ``["race", table, key, value, version number, threads]``: that many threads put
  the value at that version at once -> ``{"won": n, "lost": n}``
- ``["states"]`` -> the session states seen so far (``listen`` in the spec)
- ``["exit"]``
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from hqueue.errors import BadVersionError, HQueueError
from hqueue.metadata import MetaStore, SessionState, Version, open_metastore

STATES: list[str] = []


def _version(spec: Any) -> Version:
    if spec == "new":
        return Version.NEW
    if spec == "any":
        return Version.ANY
    return Version(int(spec))


def _run(store: MetaStore, command: list[Any]) -> Any:
    op = command[0]
    if op == "get":
        value, version = store.create_table(command[1]).get(command[2])
        return [value, version.number]
    if op == "put":
        table, key, value, version, ephemeral = command[1:6]
        new = store.create_table(table).put(key, value, _version(version), ephemeral=ephemeral)
        return {"version": new.number, "time": time.time()}
    if op == "remove":
        store.create_table(command[1]).remove(command[2])
        return {"time": time.time()}
    if op == "race":
        return _race(store, *command[1:6])
    if op == "states":
        return list(STATES)
    raise ValueError(f"unknown command {op!r}")


def _race(store: MetaStore, table: str, key: str, value: Any, version: int, threads: int) -> Any:
    barrier = threading.Barrier(threads)
    outcomes: list[str] = []

    def racer(index: int) -> None:
        target = store.create_table(table)
        barrier.wait()
        try:
            target.put(key, {**value, "thread": index}, Version(version))
            outcomes.append("won")
        except BadVersionError:
            outcomes.append("lost")

    runners = [threading.Thread(target=racer, args=(i,)) for i in range(threads)]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    return {"won": outcomes.count("won"), "lost": outcomes.count("lost")}


def _listen(state: SessionState) -> None:
    STATES.append(state.value)


def main() -> None:
    spec = json.loads(sys.argv[1])
    store = open_metastore(
        hbase=spec.get("hbase"), zookeeper=spec.get("zookeeper"), **spec["options"]
    )
    if spec.get("listen"):
        store.add_session_listener(_listen)
    print(json.dumps(["ready"]), flush=True)
    try:
        for line in sys.stdin:
            command = json.loads(line)
            if command[0] == "exit":
                break
            try:
                print(json.dumps(["ok", _run(store, command)]), flush=True)
            except HQueueError as exc:
                print(json.dumps(["error", type(exc).__name__]), flush=True)
    finally:
        store.close()


if __name__ == "__main__":
    main()
