"""Fail on any import cycle between hqueue's modules, type-only imports included.

``lint-imports`` (``.importlinter``) checks the layers with imports under
``if TYPE_CHECKING:`` left out, since those never run; a cycle through them still makes
files that cannot be read alone, so this check counts every import. Run from a
directory where ``import hqueue`` finds the package as the wheel lays it out
(``make lint`` stages it in build/lint). Prints each cycle and exits 1 if there is one.
"""

from __future__ import annotations

import sys

import grimp


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Return the strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(root: str) -> None:
        nonlocal counter
        # Iterative, so a deep import chain cannot hit the recursion limit.
        work: list[tuple[str, list[str]]] = []

        def enter(module: str) -> None:
            nonlocal counter
            index[module] = low[module] = counter
            counter += 1
            stack.append(module)
            on_stack.add(module)
            work.append((module, sorted(graph.find_modules_directly_imported_by(module))))

        enter(root)
        while work:
            module, targets = work[-1]
            if targets:
                target = targets.pop()
                if target not in index:
                    enter(target)
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def main() -> int:
    """Print every cycle in the ``hqueue`` package; return 1 if any, else 0."""
    graph = grimp.build_graph("hqueue", exclude_type_checking_imports=False)
    found = cycles(graph)
    for component in found:
        print("import cycle (type-only imports included): " + ", ".join(component))
        first = component[0]
        chain = graph.find_shortest_chain(importer=first, imported=component[1])
        back = graph.find_shortest_chain(importer=component[1], imported=first)
        if chain and back:
            print("  " + " -> ".join([*chain, *back[1:]]))
    print(f"{len(graph.modules)} modules, {len(found)} import cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
