"""The ``hqueue`` command line's verbs, one module per command group."""
