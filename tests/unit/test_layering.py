"""The layering of docs/architecture.md, checked on the source: every ``import`` statement of the
package files, read with ``ast`` (module level, inside functions and under ``TYPE_CHECKING``
alike), and every ``importlib.import_module("...")`` / ``__import__("...")`` of a literal name.

* ``broker`` may import ``pyspark_log.records`` and ``pyspark_log.wire``, nothing else of ``pyspark_log``;
* ``pyspark_log`` never imports ``broker``;
* a pure core (the Raft state machine, ``broker/log/validate.py``, ``pyspark_log/spark/planning.py``,
  the replica core ``broker/replication/replica_state.py`` and its purgatory ``purgatory.py``)
  imports no clock, file system, socket or event loop: the driver around it does the I/O;
* a module whose docstring calls it pure is held to the same rule; a docstring that calls only a
  part pure says which (``DRIVERS_OF_PURE_MODULES``: the pure modules a driver runs, which must
  be I/O-free themselves; ``PURE_FUNCTIONS_BESIDE_IO``: functions that use none of the module's
  I/O imports);
* ACLs have one home, ``broker.security.acl`` (``ACL_PACKAGE``): its modules are pure and import
  nothing of the layers above them (``ACL_PACKAGE_MAY_NOT_IMPORT``: the API handlers, the network,
  the server); no other broker module is named for ACLs or authorization except the thin callers
  listed in ``ACL_MODULES_ELSEWHERE``, and the controller takes only the model (bindings and
  filters) from the package;
* the metadata model, ``broker.metadata`` (Kafka's ``org.apache.kafka.image``), is pure and sits
  below everything that reads it: it imports no I/O, nothing of ``broker.controller`` (which
  decides what to write) or of any other broker layer but the ACL and SCRAM value types, and its
  names are imported from the module that defines them (no re-export shim elsewhere);
* the package modules import each other one way: no import cycles, counting the imports a
  function-level import or ``if TYPE_CHECKING`` would hide (a shared piece moves to a lower
  module, or the lower module states what it needs as a ``Protocol``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.source_parsing import parse as parse_source

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "pyspark_log")

BROKER_MAY_IMPORT = ("pyspark_log.records", "pyspark_log.wire")
# (importing module, imported module) pairs tolerated for now, each with its reason.
ALLOWED_CROSSINGS: dict[tuple[str, str], str] = {}

# I/O a pure core must not import (a module or any of its submodules).
IO_MODULES = ("asyncio", "os", "time", "socket", "selectors", "subprocess", "threading", "shutil")
# broker/raft is pure except its edges: the driver (sockets, timers) and its collaborators for the
# snapshot files and the voters' connections, the file store, the peer transport and the bootstrap
# from server.properties. A new raft module is pure unless listed here.
RAFT_EDGES = frozenset({
    "broker.raft", "broker.raft.driver", "broker.raft.snapshot_keeper", "broker.raft.voter_peers",
    "broker.raft.store", "broker.raft.transport", "broker.raft.bootstrap",
})  # fmt: skip
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

# broker.metadata (issue #28): every module is a pure core, and within broker it may import only
# itself and the value types its records carry
METADATA_PACKAGE = "broker.metadata"
METADATA_MAY_IMPORT = ("broker.metadata", "broker.security.acl.binding", "broker.security.sasl.scram")
# the model's central names and the one module each is imported from
METADATA_HOMES = {
    "MetadataImage": "broker.metadata.image",
    "TopicImage": "broker.metadata.image",
    "PartitionImage": "broker.metadata.image",
    "BrokerInfo": "broker.metadata.image",
    "ClusterState": "broker.metadata.cluster_state",
    "BrokerRegistration": "broker.metadata.cluster_state",
    "build_image": "broker.metadata.cluster_state",
    "apply_payload": "broker.metadata.replay",
    "apply_record": "broker.metadata.replay",
    "apply_records": "broker.metadata.replay",
    "encode_records": "broker.metadata.records",
    "decode_records": "broker.metadata.records",
    "MetadataRecord": "broker.metadata.records",
    "state_to_records": "broker.metadata.snapshot_records",
    "state_from_records": "broker.metadata.snapshot_records",
}


# Modules whose docstring calls the modules they drive pure (not themselves): each is listed
# with those modules, which the test holds to the pure rule.
DRIVERS_OF_PURE_MODULES: dict[str, tuple[str, ...]] = {
    "broker.controller.quorum": (
        "broker.controller.acl_changes",
        "broker.controller.operations",
        "broker.controller.partition_changes",
        "broker.controller.reassignment",
        "broker.controller.scram_credentials",
    ),
    "broker.controller.replication_control": (
        "broker.controller.operations",
        "broker.controller.partition_changes",
        "broker.controller.reassignment",
    ),
    "broker.controller.local": ("broker.controller.operations",),
    "broker.coordinator.share_group.manager": (
        "broker.coordinator.share_group.group",
        "broker.coordinator.share_group.partition",
        "broker.coordinator.share_group.records",
    ),
    "broker.replication.replica_manager": ("broker.replication.purgatory", "broker.replication.replica_state"),
    "pyspark_log.client.fetcher": ("pyspark_log.client.fetch_parse",),
}
# Modules with I/O whose docstring calls some of their functions pure: those functions (a
# ``Class.method`` too) must not use any name the module imports from an I/O module.
PURE_FUNCTIONS_BESIDE_IO: dict[str, tuple[str, ...]] = {
    "broker.log.producer_state": ("ProducerStateManager.prepare",),
    "pyspark_log.spark.segment_reader": (
        "segment_bases",
        "parse_offset_index",
        "index_floor",
        "parse_txn_index",
        "aborted_overlapping",
        "parse_properties",
    ),
}
# ACLs (issue #28): the model, the authorizer and the per-request rules live in one package; the
# modules elsewhere named for ACLs only call into it, each listed with what it keeps.
ACL_PACKAGE = "broker.security.acl"
ACL_PACKAGE_MAY_NOT_IMPORT = ("broker.api", "broker.network", "broker.server")
ACL_MODULES_ELSEWHERE: dict[str, str] = {
    "broker.api.acls": "the DescribeAcls / CreateAcls / DeleteAcls handlers",
    "broker.api.authz": "wraps the request handlers with the package's checks",
    "broker.controller.acl_changes": "what the controller decides: ACL changes as metadata records",
    "broker.controller.acl_control": "AclControlManager: CreateAcls / DeleteAcls on the active controller",
}
ACL_NAMED = re.compile(r"acl|authz|authori[sz]")
CONTROLLER_MAY_IMPORT_FROM_ACL = ("broker.security.acl.binding", "broker.security.acl.filters")
# "pure" as a claim; "pure Python" names a language (the twin of a C extension), not a claim.
PURE_CLAIM = re.compile(r"\bpure\b(?![ -]python)", re.IGNORECASE)


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
    yield from imports_in(module, package, path.read_text(encoding="utf-8"), str(path))


def _relative(package: str, level: int, name: str | None) -> str:
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _imported_by_call(node: ast.Call, package: str) -> str | None:
    """The literal module name of ``importlib.import_module("x")``, ``import_module(".x",
    __package__)`` or ``__import__("x")``; None for any other call (or a computed name)."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    name: str = first.value
    if name.startswith("."):
        level = len(name) - len(name.lstrip("."))
        return _relative(package, level, name.lstrip(".") or None)
    return name


def imports_in(module: str, package: str, source: str, filename: str = "<source>") -> Iterator[Import]:
    """The imports of ``source``, the text of ``module`` (in ``package``)."""
    for node in ast.walk(parse_source(source, filename=filename)):
        if isinstance(node, ast.Call):
            target = _imported_by_call(node, package)
            if target is not None:
                yield Import(module, target, node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            origin = _relative(package, node.level, node.module) if node.level else node.module or ""
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                yield Import(module, submodule if submodule in MODULES else origin, node.lineno)


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
    seen = {
        i.target
        for i in imports_in(
            "pkg.mod",
            "pkg",
            "import importlib\n"
            "from importlib import import_module\n"
            "def lazy():\n"
            "    importlib.import_module('pkg.a')\n"
            "    import_module('.b', __package__)\n"
            "    __import__('pkg.c')\n"
            "    importlib.import_module(computed)\n",
        )
    }
    assert seen == {"importlib", "pkg.a", "pkg.b", "pkg.c"}
    speedups = {i.target for i in imports_of("pyspark_log.records.speedups", MODULES["pyspark_log.records.speedups"])}
    assert "pyspark_log.records._speedups" in speedups  # importlib.import_module("pyspark_log.records._speedups")


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
    metadata = [m for m in MODULES if within(m, METADATA_PACKAGE)]
    return sorted([*raft, *metadata, *PURE_CORES_OUTSIDE_RAFT])


def test_the_pure_cores_exist() -> None:
    cores = pure_cores()
    assert {"broker.raft.core", "broker.raft.state", "broker.raft.roles", *PURE_CORES_OUTSIDE_RAFT} <= set(cores)
    assert {"broker.metadata.image", "broker.metadata.replay", "broker.metadata.cluster_state"} <= set(cores)
    assert set(cores) <= set(MODULES)


def test_pure_cores_import_no_io() -> None:
    cores = set(pure_cores())
    bad = [i for i in ALL_IMPORTS if i.importer in cores and any(within(i.target, io) for io in IO_MODULES)]
    assert not bad, f"a pure core takes time and I/O from its driver; it imports none of {IO_MODULES}:\n" + describe(
        bad
    )


def acl_modules() -> list[str]:
    return sorted(m for m in MODULES if within(m, ACL_PACKAGE))


def test_the_acl_package_is_pure_and_below_the_api() -> None:
    """``broker.security.acl`` decides with no clock, file, socket or event loop (``IO_MODULES``,
    asyncio among them) and without the request handlers: ``broker.api`` calls into it, never the
    other way."""
    modules = set(acl_modules())
    assert {f"{ACL_PACKAGE}.{m}" for m in ("binding", "authorizer", "checks", "rules")} <= modules
    bad = [
        i
        for i in ALL_IMPORTS
        if i.importer in modules and any(within(i.target, x) for x in (*IO_MODULES, *ACL_PACKAGE_MAY_NOT_IMPORT))
    ]
    assert not bad, (
        f"{ACL_PACKAGE} is pure and below the API layer; it imports none of "
        f"{(*IO_MODULES, *ACL_PACKAGE_MAY_NOT_IMPORT)}:\n" + describe(bad)
    )


def test_acls_have_one_home() -> None:
    """A broker module named for ACLs or authorization lives in ``broker.security.acl`` unless it is
    one of the listed callers (API handlers, the controller's records); the controller imports the
    model only (bindings, filters), not the decisions."""
    named = {
        m
        for m in MODULES
        if within(m, "broker") and not within(m, ACL_PACKAGE) and ACL_NAMED.search(m.rpartition(".")[2])
    }
    assert named == set(ACL_MODULES_ELSEWHERE), (
        f"ACL code belongs in {ACL_PACKAGE}; outside it only {sorted(ACL_MODULES_ELSEWHERE)} (update the list "
        f"with a reason): found {sorted(named)}"
    )
    bad = [
        i
        for i in ALL_IMPORTS
        if within(i.importer, "broker.controller")
        and within(i.target, ACL_PACKAGE)
        and not any(within(i.target, allowed) for allowed in CONTROLLER_MAY_IMPORT_FROM_ACL)
    ]
    assert not bad, f"the controller takes only {CONTROLLER_MAY_IMPORT_FROM_ACL} from {ACL_PACKAGE}:\n" + describe(bad)


def test_the_metadata_model_imports_no_layer_above_it() -> None:
    """``broker.metadata`` is read by the controller, the request handlers, replication, the
    coordinators and the metrics; it imports none of them (Kafka's ``metadata/image`` does not
    depend on the controller either)."""
    assert "broker.metadata.image" in MODULES
    bad = [
        i
        for i in ALL_IMPORTS
        if within(i.importer, METADATA_PACKAGE)
        and within(i.target, "broker")
        and not any(within(i.target, allowed) for allowed in METADATA_MAY_IMPORT)
    ]
    assert not bad, f"broker.metadata imports only {METADATA_MAY_IMPORT} of broker:\n" + describe(bad)


def top_level_names(module: str) -> set[str]:
    """The classes, functions and assigned names ``module`` defines itself (not what it imports)."""
    names: set[str] = set()
    for node in parse_source(MODULES[module].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_metadata_model_is_imported_from_its_home() -> None:
    """The model's names are defined once, in ``METADATA_HOMES``, and every ``from X import
    MetadataImage`` (and the like) reads them from a module that defines them: a re-export shim
    left behind in ``broker.controller`` (or anywhere) fails here."""
    problems = [f"{home} does not define {name}" for name, home in METADATA_HOMES.items()
                if name not in top_level_names(home)]  # fmt: skip
    for module, path in MODULES.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(parse_source(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            origin = _relative(package, node.level, node.module) if node.level else node.module or ""
            if origin not in MODULES:
                continue
            for alias in node.names:
                if alias.name in METADATA_HOMES and alias.name not in top_level_names(origin):
                    problems.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name} from {origin}, "
                        f"which re-exports it: import it from {METADATA_HOMES[alias.name]}"
                    )
    assert not problems, "\n".join(problems)


def docstring_of(module: str) -> str:
    return ast.get_docstring(parse_source(MODULES[module].read_text(encoding="utf-8"))) or ""


def io_imports(module: str) -> list[Import]:
    return [i for i in ALL_IMPORTS if i.importer == module and any(within(i.target, io) for io in IO_MODULES)]


def claims_purity(module: str) -> bool:
    return PURE_CLAIM.search(docstring_of(module)) is not None


def test_the_purity_claim_reader() -> None:
    assert claims_purity("broker.log.validate")  # "...assign their offsets: a pure function"
    assert not claims_purity("pyspark_log.client.producer")
    assert PURE_CLAIM.search("Pure: no clock") is not None
    assert PURE_CLAIM.search("everything in it has a pure Python twin") is None
    assert set(DRIVERS_OF_PURE_MODULES) | set(PURE_FUNCTIONS_BESIDE_IO) <= set(MODULES)


def test_modules_whose_docstring_says_pure_import_no_io() -> None:
    """A docstring that calls its module pure is a promise the imports keep: no asyncio, socket,
    subprocess, threading, clock or file-system module (``IO_MODULES``)."""
    claimed = [m for m in MODULES if claims_purity(m)]
    assert len(claimed) > 40
    bad = [
        i
        for m in claimed
        if m not in DRIVERS_OF_PURE_MODULES and m not in PURE_FUNCTIONS_BESIDE_IO
        for i in io_imports(m)
    ]
    assert not bad, (
        "a module whose docstring calls it pure imports I/O (move the I/O to its driver, or say in the "
        "docstring which part is pure and list it here):\n" + describe(bad)
    )


def test_drivers_name_pure_modules_that_are_pure() -> None:
    """A driver's docstring points at the pure modules it runs: each is imported by the driver,
    claims purity in its own docstring and imports no I/O."""
    problems = []
    for driver, cores in DRIVERS_OF_PURE_MODULES.items():
        imported = {i.target for i in ALL_IMPORTS if i.importer == driver}
        for core in cores:
            if core not in imported:
                problems.append(f"{driver} does not import {core}")
            if not claims_purity(core):
                problems.append(f"{core}'s docstring does not say it is pure")
            problems += [f"{core} imports {i.target}" for i in io_imports(core)]
        if not claims_purity(driver):
            problems.append(f"{driver} no longer mentions a pure part: drop it from DRIVERS_OF_PURE_MODULES")
    assert not problems, "\n".join(problems)


def _function(tree: ast.Module, qualified: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for name in qualified.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                     and n.name == name), None)  # fmt: skip
        if node is None:
            return None
        body = node.body  # type: ignore[attr-defined]
    return node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None


def test_pure_functions_beside_io_use_none_of_it() -> None:
    problems = []
    for module, functions in PURE_FUNCTIONS_BESIDE_IO.items():
        tree = parse_source(MODULES[module].read_text(encoding="utf-8"))
        io_names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                io_names |= {
                    (a.asname or a.name).split(".")[0]
                    for a in node.names
                    if any(within(a.name, io) for io in IO_MODULES)
                }
            elif isinstance(node, ast.ImportFrom) and any(within(node.module or "", io) for io in IO_MODULES):
                io_names |= {a.asname or a.name for a in node.names}
        for qualified in functions:
            function = _function(tree, qualified)
            if function is None:
                problems.append(f"{module}.{qualified} does not exist")
                continue
            used = sorted({n.id for n in ast.walk(function) if isinstance(n, ast.Name)} & io_names)
            if used:
                problems.append(f"{module}.{qualified}, called pure, uses {used}")
    assert not problems, "\n".join(problems)


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
