"""The ``hqueue`` command line (click): :mod:`hqueue.cli.main` is the entry point, one
module per command group."""

__all__: list[str] = []
