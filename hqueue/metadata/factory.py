"""Choosing and opening a metadata backend from configuration.

The rule of the command line holds everywhere: a ZooKeeper connect string means
ZooKeeper; without one, metadata lives in HBase (the standalone default).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from hqueue import settings
from hqueue.errors import InvalidArgumentError
from hqueue.metadata.backends.hbase.metastore import HBaseMetaStore
from hqueue.metadata.backends.zookeeper.metastore import ZooKeeperMetaStore
from hqueue.metadata.metastore import MetaStore

if TYPE_CHECKING:
    from hqueue.security.config import ClientSecurity
    from hqueue.security.secret import Secret

__all__ = ["open_metastore"]


def open_metastore(
    *,
    hbase: str | None = None,
    zookeeper: str | None = None,
    session_timeout: float | None = None,
    timeout: float | None = None,
    root: str | None = None,
    connect_timeout: float | None = None,
    table_prefix: str | None = None,
    table: str | None = None,
    clock_skew: float | None = None,
    poll_interval: float | None = None,
    resync_interval: float | None = None,
    pool_size: int | None = None,
    zookeeper_auth: Secret | None = None,
    security: ClientSecurity | None = None,
    **unknown: object,
) -> MetaStore:
    """Return a connected store: a :class:`ZooKeeperMetaStore` on ``zookeeper`` (a
    kazoo connect string) when it is given, otherwise an :class:`HBaseMetaStore` on
    ``hbase`` (``HOST:PORT``, default ``127.0.0.1:9090``).

    An option left at ``None`` takes the backend's default. Both backends take
    ``session_timeout`` (seconds ephemeral entries outlive this store: the
    ZooKeeper session or the HBase lease) and ``timeout`` (seconds per call).
    ZooKeeper only: ``root``, ``connect_timeout``, ``zookeeper_auth`` (digest
    credentials ``user:password``, e.g. from
    :func:`hqueue.security.credentials.zookeeper_auth`). HBase only: ``table_prefix``
    (``None``: the ``HQUEUE_TABLE_PREFIX`` environment variable; ``""``: none),
    ``table``, ``clock_skew``, ``poll_interval``, ``resync_interval``, ``pool_size``,
    ``security`` (what the Thrift connections present: TLS, a token).
    The backends' constructors say what each means.

    :raises InvalidArgumentError: on an unknown option, an option of the other
        backend (naming them), or a bad value; before connecting.
    :raises ConnectionLostError: if the backend cannot be reached.
    """
    # The parameters as given: every one but the choice of backend is an option.
    options = {
        name: value
        for name, value in locals().items()
        if name not in ("hbase", "zookeeper", "unknown") and value is not None
    }
    if unknown:
        raise InvalidArgumentError(
            f"unknown metadata option(s) {_names(unknown)}; the options are "
            f"{_names(inspect.signature(open_metastore).parameters)}"
        )
    if zookeeper:
        _check_applies(ZooKeeperMetaStore, "ZooKeeper", options)
        return ZooKeeperMetaStore(zookeeper, **options)
    _check_applies(HBaseMetaStore, "HBase", options)
    options["table_prefix"] = settings.table_prefix(table_prefix)
    return HBaseMetaStore(hbase or settings.DEFAULT_HBASE, **options)


def _check_applies(backend: type[MetaStore], name: str, options: dict[str, object]) -> None:
    """Refuse the options the backend's constructor does not take.

    :raises InvalidArgumentError: naming them.
    """
    accepted = inspect.signature(backend).parameters
    foreign = [option for option in options if option not in accepted]
    if foreign:
        raise InvalidArgumentError(
            f"metadata option(s) {_names(foreign)} do not apply to the {name} backend"
        )


def _names(names: object) -> str:
    return ", ".join(f"'{name}'" for name in sorted(names))  # type: ignore[call-overload]
