"""The layering of DESIGN.md, checked on the source: every ``import`` statement of the package
files, read with ``ast`` (module level, inside functions and under ``TYPE_CHECKING`` alike).

* ``broker`` may import ``pyspark_log.records`` and ``pyspark_log.wire``, nothing else of ``pyspark_log``;
* ``pyspark_log`` never imports ``broker``;
* a pure core (the Raft state machine, ``broker/log/validate.py``, ``pyspark_log/spark/planning.py``,
  the replica core ``broker/replication/replica_state.py`` and its purgatory ``purgatory.py``)
  imports no clock, file system, socket or event loop: the driver around it does the I/O;
* the package modules import each other one way: no import cycles, counting the imports a
  function-level import or ``if TYPE_CHECKING`` would hide (a shared piece moves to a lower
  module, or the lower module states what it needs as a ``Protocol``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "pyspark_log")

BROKER_MAY_IMPORT = ("pyspark_log.records", "pyspark_log.wire")
# (importing module, imported module) pairs tolerated for now, each with its reason.
ALLOWED_CROSSINGS: dict[tuple[str, str], str] = {}

# I/O a pure core must not import (a module or any of its submodules).
IO_MODULES = ("asyncio", "os", "time", "socket", "selectors", "subprocess", "threading", "shutil")
# broker/raft is pure except its edges: the driver (sockets, timers), the file store, the peer
# transport and the bootstrap from server.properties. A new raft module is pure unless listed here.
RAFT_EDGES = frozenset(
    {"broker.raft", "broker.raft.driver", "broker.raft.store", "broker.raft.transport", "broker.raft.bootstrap"}
)
# the replica core and the delayed-operation mechanism (issue #28): asyncio lives in the driver,
# broker.replication.replica_manager, and the log I/O in broker.replication.partition
PURE_CORES_OUTSIDE_RAFT = frozenset(
    {
        "broker.log.validate",
        "pyspark_log.spark.planning",
        "broker.replication.replica_state",
        "broker.replication.purgatory",
        "broker.replication.isr",
        "broker.replication.delete_records",
    }
)


@dataclass(frozen=True)
class Import:
    """One imported name: ``target`` is the module it resolves to (``from a import b`` is the
    module ``a.b`` when that is a package module, else ``a``); ``line`` is where it is written."""

    importer: str
    target: str
    line: int


def package_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the two packages."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = package_modules()


def imports_of(module: str, path: Path) -> Iterator[Import]:
    """Every import statement anywhere in ``path`` (function bodies and ``if TYPE_CHECKING`` too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield Import(module, submodule if submodule in MODULES else source, node.lineno)


ALL_IMPORTS = [imp for module, path in MODULES.items() for imp in imports_of(module, path)]


def within(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


def describe(imports: list[Import]) -> str:
    lines = (f"  {MODULES[i.importer].relative_to(ROOT)}:{i.line} imports {i.target}" for i in imports)
    return "\n".join(dict.fromkeys(lines))


def test_the_import_reader_sees_every_kind_of_import() -> None:
    """A self-check of ``imports_of`` on the patterns the rules below rely on."""
    raft_core = {i.target for i in imports_of("broker.raft.core", MODULES["broker.raft.core"])}
    assert "broker.raft.state" in raft_core  # from broker.raft.state import QuorumState
    assert "random" in raft_core
    by_target = {i.target for i in ALL_IMPORTS}
    assert "typing" in by_target
    assert "pyspark_log.wire.api_keys" in by_target
    assert len(MODULES) > 150


def test_broker_imports_only_records_and_wire_of_pyspark_log() -> None:
    bad = [
        i
        for i in ALL_IMPORTS
        if within(i.importer, "broker")
        and within(i.target, "pyspark_log")
        and not any(within(i.target, allowed) for allowed in BROKER_MAY_IMPORT)
        and (i.importer, i.target) not in ALLOWED_CROSSINGS
    ]
    assert not bad, "broker may import only pyspark_log.records and pyspark_log.wire:\n" + describe(bad)


def test_pyspark_log_never_imports_broker() -> None:
    bad = [
        i
        for i in ALL_IMPORTS
        if within(i.importer, "pyspark_log")
        and within(i.target, "broker")
        and (i.importer, i.target) not in ALLOWED_CROSSINGS
    ]
    assert not bad, "pyspark_log never imports broker (start it as a process):\n" + describe(bad)


def pure_cores() -> list[str]:
    raft = [m for m in MODULES if within(m, "broker.raft") and m not in RAFT_EDGES]
    return sorted([*raft, *PURE_CORES_OUTSIDE_RAFT])


def test_the_pure_cores_exist() -> None:
    cores = pure_cores()
    assert {"broker.raft.core", "broker.raft.state", "broker.raft.roles", *PURE_CORES_OUTSIDE_RAFT} <= set(cores)
    assert set(cores) <= set(MODULES)


def test_pure_cores_import_no_io() -> None:
    cores = set(pure_cores())
    bad = [i for i in ALL_IMPORTS if i.importer in cores and any(within(i.target, io) for io in IO_MODULES)]
    assert not bad, f"a pure core takes time and I/O from its driver; it imports none of {IO_MODULES}:\n" + describe(
        bad
    )


def import_graph() -> dict[str, set[str]]:
    """Package module -> the package modules it imports (anywhere in its file)."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for i in ALL_IMPORTS:
        if i.target in MODULES and i.target != i.importer:
            graph[i.importer].add(i.target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each as
    a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_hidden_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_among_package_modules() -> None:
    graph = import_graph()
    found = cycles(graph)
    detail = []
    for component in found:
        members = set(component)
        edges = [i for i in ALL_IMPORTS if i.importer in members and i.target in members and i.target != i.importer]
        detail.append(describe(edges))
    assert not found, "import cycles (move the shared piece to a lower module):\n" + "\n\n".join(detail)
