"""The wire layer: Thrift IDL loading, the framed client and the server loop, the
message block answer format. Imports nothing of hqueue above :mod:`hqueue.message`."""
