"""Load the Thrift IDLs, in one place.

``Hbase.thrift`` is the one happybase bundles (``import happybase`` registers it
as the ``Hbase_thrift`` module), so the standalone server and happybase share
one set of types. hqueue's own IDLs live in the repository's ``thrift/``
folder.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import ModuleType

import thriftpy2

IDL_DIR = Path(__file__).resolve().parent.parent / "thrift"


def hbase1() -> ModuleType:
    """Return HBase's Thrift1 module (``Hbase.thrift`` as happybase bundles it)."""
    import happybase  # noqa: F401  (registers Hbase_thrift)

    return sys.modules["Hbase_thrift"]


@functools.cache
def load(name: str) -> ModuleType:
    """Return the module for ``thrift/<name>.thrift``, loaded once.

    Raises:
        FileNotFoundError: the IDL is not in the source tree.
    """
    path = IDL_DIR / f"{name}.thrift"
    if not path.is_file():
        raise FileNotFoundError(f"Thrift IDL {path} is missing: install hqueue from its source "
                                "tree (pip install -e .)")
    return thriftpy2.load(str(path), module_name=f"{name}_thrift")


def hbase2() -> ModuleType:
    """Return the subset of HBase 2's Thrift2 service hqueue uses (``thrift/hbase2.thrift``)."""
    return load("hbase2")


def sidecar() -> ModuleType:
    """Return the sidecar's Thrift service module (``thrift/sidecar.thrift``)."""
    return load("sidecar")


def subscriber() -> ModuleType:
    """Return the subscriber's Thrift service module (``thrift/subscriber.thrift``)."""
    return load("subscriber")
