"""The storage engine of ``hqueue standalone``: HBase's data model (tables, families,
versions, TTL, regions) over LMDB, with its server-side scanners and filters."""

__all__: list[str] = []
