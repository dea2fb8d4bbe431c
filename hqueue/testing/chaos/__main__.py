"""``python -m hqueue.testing.chaos [SCENARIO ...] [--size small|medium|full]``: run
fault scenarios and print each one's table; exit 1 if a checker found anything.
Without a name, the scenarios of :mod:`~hqueue.testing.chaos.scenarios`; those on
real HBase (:mod:`~hqueue.testing.chaos.hbase_scenarios`) run when named."""

from __future__ import annotations

import argparse
import logging
import sys

from hqueue.testing.chaos.hbase_scenarios import HBASE_SCENARIOS, MEDIUM
from hqueue.testing.chaos.scenarios import FULL, SCENARIOS, SMALL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hqueue.testing.chaos")
    every = {**SCENARIOS, **HBASE_SCENARIOS}
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO")
    parser.add_argument("--size", choices=["small", "medium", "full"], default="full")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.scenarios) - set(every))
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}; one of {', '.join(sorted(every))}")
    # The clients' connection losses during a fault are expected, not news.
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    size = {"small": SMALL, "medium": MEDIUM, "full": FULL}[args.size]
    failed = False
    for name in args.scenarios or list(SCENARIOS):
        outcome = every[name](size, None)
        print(outcome.table(), flush=True)
        for kind, found in outcome.report.findings():
            for finding in found[:20]:
                print(f"  {kind.replace('_', ' ')}: {finding}", flush=True)
        failed |= not outcome.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
