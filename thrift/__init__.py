"""hqueue's Thrift IDLs, installed as the data package ``hqueue.wire.thrift``.

The ``.thrift`` files beside this one are the contract for clients in any language;
this file only makes the folder a package, so :mod:`importlib.resources` finds the IDLs
in an editable install, the wheel and a Spark executor alike (read by
:mod:`hqueue.wire.idl`).
"""

__all__: list[str] = []
