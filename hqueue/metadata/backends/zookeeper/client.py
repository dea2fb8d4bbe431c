"""The kazoo calls the ZooKeeper backend makes, each bounded by a timeout, reads
retried across connection losses, and kazoo's exceptions turned into hqueue's at
this boundary (:func:`zk_errors`).

Not public API.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Auth
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.security import ACL, make_acl, make_digest_acl

from hqueue.errors import (
    AuthenticationError,
    AuthorizationError,
    BadVersionError,
    ConnectionLostError,
    HQueueError,
    KeyExistsError,
    MetadataError,
    NoKeyError,
    SessionExpiredError,
)
from hqueue.security.secret import Secret

__all__ = ["RETRIED", "ZooKeeperClient", "kazoo_logger", "owner_acl", "zk_errors"]

_FETCH_BATCH = 1000

RETRIED = (kz.ConnectionLoss, kz.OperationTimeoutError, KazooTimeoutError)
"""The kazoo exceptions after which an idempotent read is sent again."""


@contextlib.contextmanager
def zk_errors(what: str) -> Iterator[None]:
    """Translate kazoo's exceptions into hqueue's for the block (``what`` names the
    operation in the message)."""
    try:
        yield
    except HQueueError:
        raise
    except kz.NoNodeError:
        raise NoKeyError(f"{what}: no such key") from None
    except kz.NodeExistsError:
        raise KeyExistsError(f"{what}: key exists") from None
    except kz.BadVersionError:
        raise BadVersionError(f"{what}: version changed") from None
    except kz.NoAuthError:
        raise AuthorizationError(
            f"{what}: ZooKeeper refused it: the znode's ACL does not let these credentials "
            "write it (hqueue's znodes are written only with the digest credentials they "
            "were created with: the ZooKeeper auth file)",
            action="zookeeper",
        ) from None
    except kz.AuthFailedError:
        raise AuthenticationError(f"{what}: ZooKeeper refused this session's credentials") from None
    except kz.SessionExpiredError:
        raise SessionExpiredError(f"{what}: ZooKeeper session expired") from None
    except (kz.ConnectionClosedError, *RETRIED) as exc:
        raise ConnectionLostError(
            f"{what}: ZooKeeper unreachable ({str(exc) or type(exc).__name__})"
        ) from None
    except kz.KazooException as exc:
        raise MetadataError(f"{what}: ZooKeeper error ({str(exc) or type(exc).__name__})") from None


def owner_acl(credentials: Secret) -> list[ACL]:
    """Return the ACL of every znode a store with the digest ``credentials``
    (``user:password``) creates: that identity may do everything, anyone else only
    read."""
    user, _, password = credentials.reveal().decode("utf-8", "surrogateescape").partition(":")
    return [make_digest_acl(user, password, all=True), make_acl("world", "anyone", read=True)]


class _HideCredentials(logging.Filter):
    """Shows kazoo's authentication requests without their credentials."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, Auth) for a in record.args):
            record.args = tuple(
                f"Auth(scheme={a.scheme!r}, auth=***)" if isinstance(a, Auth) else a
                for a in record.args
            )
        return True


def kazoo_logger() -> logging.Logger:
    """Return the logger the backend's kazoo clients log through: kazoo's own
    messages (under ``kazoo``, so that silencing ``kazoo`` silences it), except that
    the digest credentials kazoo's DEBUG lines would show are hidden."""
    logger = logging.getLogger("kazoo.hqueue")
    if not any(isinstance(f, _HideCredentials) for f in logger.filters):
        logger.addFilter(_HideCredentials())
    return logger


class ZooKeeperClient:
    """A kazoo client with the backend's timeouts: each request waits at most
    ``timeout`` seconds; reads are retried until ``read_deadline`` seconds have passed.

    Raises kazoo's exceptions; callers translate them with :func:`zk_errors`.
    """

    def __init__(self, kazoo: KazooClient, *, timeout: float, read_deadline: float) -> None:
        self.kazoo = kazoo
        self._timeout = timeout
        self._read_deadline = read_deadline
        self.closed = False

    def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Return the result of one kazoo ``*_async`` request."""
        return self.wait(method(*args, **kwargs))

    def wait(self, pending: Any) -> Any:
        """Return the result of a kazoo request already sent (its async result)."""
        return pending.get(timeout=self._timeout)

    def read(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Return the result of one idempotent kazoo request, sent again after
        connection losses until the read deadline."""
        deadline = time.monotonic() + self._read_deadline
        delay = 0.05
        while True:
            try:
                return self.call(method, *args, **kwargs)
            except RETRIED:
                if time.monotonic() + delay > deadline or self.closed:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def fetch(
        self, paths: Sequence[str], watch: Callable[[WatchedEvent], None] | None = None
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        """Return ``(data, stat)`` of each path (``None`` where it does not exist),
        pipelining the requests."""
        return self.pipeline(self.kazoo.get_async, paths, watch=watch)

    def stats(self, paths: Sequence[str]) -> list[ZnodeStat | None]:
        """Return the stat of each path (``None`` where it does not exist), pipelining
        the requests (``exists``: no data is sent)."""
        return self.pipeline(self.kazoo.exists_async, paths)

    def pipeline(
        self, method: Callable[..., Any], paths: Sequence[str], **kwargs: Any
    ) -> list[Any]:
        """Return the result of the idempotent read ``method`` of each path (``None``
        where it does not exist), sending a batch of requests before awaiting any
        answer, and a request whose answer was lost again, with retries."""
        results: list[Any] = []
        for start in range(0, len(paths), _FETCH_BATCH):
            batch = paths[start : start + _FETCH_BATCH]
            pending = [method(path, **kwargs) for path in batch]
            for path, result in zip(batch, pending, strict=True):
                try:
                    results.append(result.get(timeout=self._timeout))
                except kz.NoNodeError:
                    results.append(None)
                except RETRIED:
                    # One lost answer: read that path again, with retries.
                    try:
                        results.append(self.read(method, path, **kwargs))
                    except kz.NoNodeError:
                        results.append(None)
        return results
