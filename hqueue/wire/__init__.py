"""The wire layer: Thrift IDL loading, the framed client and the server loop, the
message block answer format, the sidecar calls' typed values. Imports nothing of
hqueue above :mod:`hqueue.message`.

Nothing is re-exported here: import each name from its module.
"""

__all__: list[str] = []
