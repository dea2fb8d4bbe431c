"""The columns of a read of a queue, as Spark sees them: what the data source, the
locality-aware reader and the package's ``__init__`` share, so that none of them imports
another for it."""

from __future__ import annotations

__all__ = ["SCHEMA"]

SCHEMA = "partition int, timestamp timestamp, sequence int, id string, topic string, value binary"
"""The columns of a read, as a Spark DDL string."""
