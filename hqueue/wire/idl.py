"""Load the Thrift IDLs, in one place.

``Hbase.thrift`` is the one happybase bundles (``import happybase`` registers it
as the ``Hbase_thrift`` module), so the standalone server and happybase share
one set of types. hqueue's own IDLs are the repository's ``thrift/`` folder, shipped
inside the package as ``hqueue/wire/thrift/`` and read with :mod:`importlib.resources`,
so an installed wheel (or a Spark executor) has them.
"""

from __future__ import annotations

import functools
import sys
from importlib import resources
from types import ModuleType

import thriftpy2

__all__ = ["AUTH_CALL", "IDL_DIR", "auth", "hbase1", "hbase2", "load", "sidecar", "subscriber"]

IDL_DIR = resources.files("hqueue.wire.thrift")
AUTH_CALL = "hqueueAuthenticate"
"""The call of :func:`auth` that opens a connection."""


def hbase1() -> ModuleType:
    """Return HBase's Thrift1 module (``Hbase.thrift`` as happybase bundles it)."""
    import happybase  # noqa: F401  (registers Hbase_thrift)

    return sys.modules["Hbase_thrift"]


@functools.cache
def load(name: str) -> ModuleType:
    """Return the module for ``thrift/<name>.thrift``, loaded once.

    :raises FileNotFoundError: the IDL is missing from the installed package.
    """
    path = IDL_DIR / f"{name}.thrift"
    if not path.is_file():
        raise FileNotFoundError(
            f"Thrift IDL {name}.thrift is missing from the installed "
            "hqueue package: reinstall hqueue"
        )
    # as_file: a zipped install has no file path of its own for thriftpy2 to read.
    with resources.as_file(path) as real:
        return thriftpy2.load(str(real), module_name=f"{name}_thrift")


def hbase2() -> ModuleType:
    """Return the subset of HBase 2's Thrift2 service hqueue uses (``thrift/hbase2.thrift``)."""
    return load("hbase2")


def auth() -> ModuleType:
    """Return the authentication call's module (``thrift/auth.thrift``): the
    ``hqueueAuthenticate`` call that opens a connection, served by every hqueue
    server."""
    return load("auth")


def sidecar() -> ModuleType:
    """Return the sidecar's Thrift service module (``thrift/sidecar.thrift``)."""
    return load("sidecar")


def subscriber() -> ModuleType:
    """Return the subscriber's Thrift service module (``thrift/subscriber.thrift``)."""
    return load("subscriber")
