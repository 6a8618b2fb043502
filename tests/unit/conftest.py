"""The unit tier stays honest: "no processes, no sockets" (the ``unit`` marker in pyproject.toml).

While a test under ``tests/unit`` runs (its setup, call and teardown, so module-scoped fixtures
too), connecting or binding a network socket and starting a process raise ``UnitTierViolation``,
and the test fails naming what it tried, even where the code under test swallowed the error.
Only the test's own (main) thread is refused: a thread an earlier integration test of the same
xdist worker left behind (a client reconnecting) goes on as before.
``socket.socketpair`` stays allowed (asyncio's event loop wakes itself through one; nothing leaves
the process). A test that needs a listener or a child process belongs in ``tests/integration``.
"""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_VIOLATIONS = pytest.StashKey[list[str]]()
_INHERITED = object()


class UnitTierViolation(RuntimeError):
    """A unit test reached for a socket or a process; not an ``OSError``, so no retry hides it."""


def _refuse(record: list[str], what: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            # a thread an earlier (integration) test of this worker left behind, not this test
            return original(*args, **kwargs)
        message = f"unit tests open no sockets and start no processes: {what} called"
        record.append(message)
        raise UnitTierViolation(message)

    return refused


@contextmanager
def _guard(record: list[str]) -> Iterator[None]:
    targets: list[tuple[Any, str]] = [
        (socket.socket, "connect"),
        (socket.socket, "connect_ex"),
        (socket.socket, "bind"),
        (socket, "create_connection"),
        (subprocess.Popen, "_execute_child"),
        (os, "fork"),
        (os, "system"),
        (os, "posix_spawn"),
        (os, "posix_spawnp"),
        (multiprocessing.process.BaseProcess, "start"),
    ]
    label = {socket.socket: "socket.socket", socket: "socket", subprocess.Popen: "subprocess.Popen", os: "os"}
    # (owner, name, the owner's own attribute or _INHERITED when it came from a base class)
    saved = [(owner, name, vars(owner).get(name, _INHERITED)) for owner, name in targets if hasattr(owner, name)]
    for owner, name, _ in saved:
        what = f"{label.get(owner, getattr(owner, '__name__', owner))}.{name}"
        setattr(owner, name, _refuse(record, what, getattr(owner, name)))
    try:
        yield
    finally:
        for owner, name, original in saved:
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


_UNIT = Path(__file__).parent


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    # pytest calls this hook for every item of the session, whatever conftest defines it
    if _UNIT not in item.path.parents:
        yield
        return
    record = item.stash.setdefault(_VIOLATIONS, [])
    with _guard(record):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    record = item.stash.get(_VIOLATIONS, [])
    if record:
        if report.passed:
            report.outcome = "failed"
            report.longrepr = "\n".join(dict.fromkeys(record))
        record.clear()
