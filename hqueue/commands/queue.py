"""``hqueue queue create|list|describe|delete``: queues' metadata.

These commands work on the metadata only (the queue's HBase table is created by the
queues layer). Errors print one line and exit with status 1.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import click

from hqueue.errors import HQueueError
from hqueue.metadata import MetaStore, Version, open_metastore
from hqueue.metadata.managers import QueueInfo, QueueInfoManager
from hqueue.metadata.resources import MAX_PARTITIONS

__all__ = ["queue"]


@contextlib.contextmanager
def _queues(ctx: click.Context) -> Iterator[QueueInfoManager]:
    """Yield a QueueInfoManager on the store the global options name; hqueue errors
    become one-line click errors (exit status 1)."""
    options: dict[str, Any] = ctx.find_root().obj or {}
    if not logging.getLogger().handlers:
        # kazoo narrates every reconnection attempt; the error below says it all.
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    store: MetaStore | None = None
    try:
        store = open_metastore(
            hbase=options.get("hbase"), zookeeper=options.get("zookeeper"), timeout=10.0
        )
        yield QueueInfoManager(store)
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        if store is not None:
            store.close()


def _record(info: QueueInfo, version: Version) -> dict[str, Any]:
    return {
        "name": info.name,
        "partitions": info.partitions,
        "regions": info.regions,
        "ttl_seconds": info.ttl_seconds,
        "created_ms": info.created_ms,
        "schema": info.schema,
        "version": version.number,
    }


def _emit(ctx: click.Context, record: dict[str, Any], text: str) -> None:
    options: dict[str, Any] = ctx.find_root().obj or {}
    if options.get("format") == "json":
        click.echo(json.dumps(record, sort_keys=True))
    else:
        click.echo(text)


def _ttl(info: QueueInfo) -> str:
    return "forever" if info.ttl_seconds is None else f"{info.ttl_seconds}s"


@click.group("queue")
def queue() -> None:
    """Create, list, describe and delete queues (their metadata)."""


@queue.command("create")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(1, MAX_PARTITIONS), required=True,
              help="Number of partitions (1..32768).")
@click.option("--ttl", type=click.IntRange(min=1), default=None,
              help="Seconds messages are kept; default: forever.")
@click.option("--regions", type=click.IntRange(min=1), default=None,
              help="Regions to pre-split into (default: one per partition).")
@click.pass_context
def create(ctx: click.Context, name: str, partitions: int, ttl: int | None,
           regions: int | None) -> None:
    """Register queue NAME. Fails if it exists."""
    with _queues(ctx) as queues:
        info, version = queues.create_queue_info(
            name, partitions, regions=regions, ttl_seconds=ttl
        )
    _emit(ctx, {"created": True, **_record(info, version)},
          f"created queue {info.name}: {info.partitions} partitions, "
          f"{info.regions} regions, ttl {_ttl(info)}")


@queue.command("list")
@click.pass_context
def list_queues(ctx: click.Context) -> None:
    """List the queues, one per line."""
    with _queues(ctx) as queues:
        found = queues.list_queues()
    for info, version in found.values():
        _emit(ctx, _record(info, version),
              f"{info.name}\tpartitions={info.partitions}\tregions={info.regions}\t"
              f"ttl={_ttl(info)}")


@queue.command("describe")
@click.argument("name")
@click.pass_context
def describe(ctx: click.Context, name: str) -> None:
    """Show queue NAME's metadata."""
    with _queues(ctx) as queues:
        info, version = queues.read_queue_info(name)
    record = _record(info, version)
    _emit(ctx, record, "\n".join(f"{key}: {value}" for key, value in record.items()))


@queue.command("delete")
@click.argument("name")
@click.pass_context
def delete(ctx: click.Context, name: str) -> None:
    """Delete queue NAME's metadata (owners, subscriptions, checkpoints too)."""
    with _queues(ctx) as queues:
        queues.delete_queue_info(name)
    _emit(ctx, {"deleted": True, "name": name}, f"deleted queue {name}")
