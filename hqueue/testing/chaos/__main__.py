"""``python -m hqueue.testing.chaos [SCENARIO ...] [--size small|full]``: run fault
scenarios and print each one's table; exit 1 if a checker found anything."""

from __future__ import annotations

import argparse
import logging
import sys

from hqueue.testing.chaos.scenarios import FULL, SCENARIOS, SMALL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hqueue.testing.chaos")
    parser.add_argument("scenarios", nargs="*", choices=[[], *SCENARIOS], metavar="SCENARIO")
    parser.add_argument("--size", choices=["small", "full"], default="full")
    args = parser.parse_args(argv)
    # The clients' connection losses during a fault are expected, not news.
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    size = FULL if args.size == "full" else SMALL
    failed = False
    for name in args.scenarios or list(SCENARIOS):
        outcome = SCENARIOS[name](size, None)
        print(outcome.table(), flush=True)
        failed |= not outcome.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
