"""``python -m hqueue``: the same as the ``hqueue`` console script."""

from hqueue.cli.main import main

main()
