"""The benchmarks' one table renderer: what a report prints is rows handed to it.

:class:`Table` collects a Markdown table's rows (:func:`markdown_header` and
:func:`markdown_row` are its two lines' formats, for a report that prints a row at a
time as it goes); :func:`text_table` renders a fixed-width one, the first column
left-aligned and the others right.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["Table", "markdown_header", "markdown_row", "text_table"]

_ALIGN = {"l": "---", "r": "---:", "c": ":---:"}


def markdown_row(cells: Iterable[object]) -> str:
    """Return one row of a Markdown table."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_header(titles: Sequence[str], align: str) -> str:
    """Return a Markdown table's header and rule; ``align`` has a letter per column,
    ``l``, ``r`` or ``c``.

    Raises:
        ValueError: ``align`` has not one known letter per title.
    """
    if len(align) != len(titles) or set(align) - set(_ALIGN):
        raise ValueError(f"'align' must have one of l, r, c per title, not {align!r}")
    return markdown_row(titles) + "\n" + markdown_row(_ALIGN[a] for a in align)


class Table:
    """A Markdown table: its titles, a letter of ``align`` per column (``l``, ``r`` or
    ``c``), and the rows :meth:`add` gives it, in order; ``str()`` renders it.

    Raises:
        ValueError: ``align`` has not one known letter per title.
    """

    def __init__(self, titles: Sequence[str], align: str) -> None:
        self.header = markdown_header(titles, align)
        self.columns = len(titles)
        self.rows: list[tuple[object, ...]] = []

    def add(self, *cells: object) -> None:
        """Add a row of one cell per column.

        Raises:
            ValueError: not one cell per column.
        """
        if len(cells) != self.columns:
            raise ValueError(f"a row has {self.columns} cells, not {len(cells)}: {cells!r}")
        self.rows.append(cells)

    def __str__(self) -> str:
        return "\n".join([self.header, *(markdown_row(row) for row in self.rows)])


def text_table(titles: Sequence[str], widths: Sequence[int], rows: Iterable[Sequence[str]]) -> str:
    """Return a fixed-width table: the first column left-aligned, the others right.

    Raises:
        ValueError: ``widths`` has not one width per title.
    """
    if len(widths) != len(titles):
        raise ValueError("'widths' must have one width per title")

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        return f"{first:<{widths[0]}}" + "".join(
            f"{c:>{w}}" for c, w in zip(rest, widths[1:], strict=True)
        )

    return "\n".join([line(titles), *(line(r) for r in rows)])
