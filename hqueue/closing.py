"""One context-manager protocol for everything in hqueue that holds resources."""

from __future__ import annotations

from typing import Self

__all__ = ["Closeable"]


class Closeable:
    """A context manager that returns itself on entry and calls :meth:`close` on exit
    (whether or not the block raised). Subclasses implement ``close``, idempotently."""

    def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
