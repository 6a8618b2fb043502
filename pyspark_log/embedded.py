"""Start a pylog broker as a child process: for the demo, notebooks, tests and benchmarks.

This is the one way pylog code starts a broker it does not run itself. The broker is the real
``python -m broker`` process (its public entry point), on a free loopback port unless one is
given; ``EmbeddedBroker`` waits for its ready line and knows its bootstrap address.

A broker refuses to start on log dirs that were never formatted (as Kafka does). As a convenience,
``EmbeddedBroker`` formats them itself before a start, with the broker's own flags: it runs
``python -m broker.storage format --ignore-formatted`` (``pylog storage format``) with the
``cluster.id`` override as ``--cluster-id`` (a random id without one) and ``--standalone`` for a
controller without ``controller.quorum.voters`` (``kraft=True``). A dir that is formatted already
is left as it is, so a dir of another node or cluster is still refused at start.

    with EmbeddedBroker() as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

META = "meta.properties"
READY_PATTERN = re.compile(r"pylog broker ready: .*listeners=(?P<listeners>\S+)")


def random_cluster_id() -> str:
    """A random cluster id as ``pylog storage random-uuid`` prints it (base64url UUID, no padding,
    never starting with ``-``)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class BrokerStartError(RuntimeError):
    """The broker process exited or stayed silent before its ready line; carries its output."""


class EmbeddedBroker:
    """A broker child process with its own data directory (a temporary one unless given)."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        port: int = 0,
        overrides: Mapping[str, str] | None = None,
        python: str = sys.executable,
        start_timeout_s: float = 60.0,
        log_path: str | Path | None = None,
        kraft: bool = False,
        format_args: tuple[str, ...] = (),
    ) -> None:
        """``kraft``: run as a one-node KRaft cluster (``process.roles=broker,controller``, the node
        its own metadata quorum) instead of the single-process metadata file; ``overrides`` win.
        ``format_args``: the quorum flags of ``pylog storage format`` (KIP-853 ``--initial-controllers
        ...`` or ``--no-initial-controllers``) instead of the automatic ``--standalone``."""
        self.format_args = tuple(format_args)
        self._owns_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="pylog-"))
        self.port = port
        self.overrides = {**({"process.roles": "broker,controller"} if kraft else {}), **(overrides or {})}
        self._python = python
        self._start_timeout_s = start_timeout_s
        self._log_path = Path(log_path) if log_path else self.data_dir / "broker.out"
        self._proc: subprocess.Popen[str] | None = None
        self._output: deque[str] = deque(maxlen=400)
        self._ready = threading.Event()
        self._pump: threading.Thread | None = None
        self.bootstrap_servers = ""
        self._started_at = 0.0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def output(self) -> str:
        """The last lines the broker printed (stdout and stderr)."""
        return "".join(self._output)

    def start(self, *, wait: bool = True) -> EmbeddedBroker:
        """Start the process and wait for its ready line (``wait=False``: return at once and call
        ``wait_ready`` later, e.g. to start the voters of a quorum together)."""
        if self.running:
            raise RuntimeError("broker already running")
        # The output pump opens <data_dir>/broker.out at once: the directory must exist first.
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        args = [self._python, "-m", "broker", "--data-dir", str(self.data_dir / "logs")]
        overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", **self.overrides}
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._format(args[3:], overrides, env)
        self._ready.clear()
        # its own process group: ``kill`` takes the broker's helper processes (log cleaner workers)
        # down with it, as a machine crash would, instead of leaving them orphaned
        self._proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, bufsize=1,
            start_new_session=True,
        )  # fmt: skip
        self._pump = threading.Thread(target=self._pump_output, args=(self._proc,), daemon=True)
        self._pump.start()
        self._started_at = time.monotonic()
        return self.wait_ready() if wait else self

    def _format(self, broker_args: list[str], overrides: Mapping[str, str], env: Mapping[str, str]) -> None:
        """Format the log dirs (see the module docstring) unless the data dir's are formatted and no
        other ``log.dirs`` is given. A failure is not raised here: the broker's own start then says
        what is wrong (a config error, or the dirs left unformatted), as it would for an operator."""
        if "log.dirs" not in overrides and "log.dir" not in overrides and (self.data_dir / "logs" / META).exists():
            return
        roles = overrides.get("process.roles", "")
        voters = overrides.get("controller.quorum.voters") or overrides.get("quorum.voters")
        cluster_id = overrides.get("cluster.id") or random_cluster_id()
        args = [self._python, "-m", "broker.storage", "format", *broker_args, "--cluster-id", cluster_id, "-g"]
        if self.format_args:
            args += self.format_args
        elif "controller" in roles and not voters:
            args.append("--standalone")
        done = subprocess.run(args, capture_output=True, text=True, env=dict(env), check=False, timeout=120)
        with open(self._log_path, "a", encoding="utf-8") as log_file:
            for line in (done.stdout + done.stderr).splitlines(keepends=True):
                self._output.append(line)
                log_file.write(line)

    def wait_ready(self) -> EmbeddedBroker:
        """Block until the started process prints its ready line; BrokerStartError (the process
        killed) when it exits first or stays silent for ``start_timeout_s`` since its start."""
        assert self._proc is not None, "start() first"
        deadline = self._started_at + self._start_timeout_s
        while not self._ready.wait(0.05):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(f"broker did not become ready; its output:\n{self.output()}")
        return self

    def _pump_output(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with open(self._log_path, "a", encoding="utf-8") as log_file:
            for line in proc.stdout:
                self._output.append(line)
                log_file.write(line)
                log_file.flush()
                match = READY_PATTERN.search(line)
                if match and not self._ready.is_set():
                    first = match.group("listeners").split(",")[0]
                    self.bootstrap_servers = first.split("://", 1)[1]
                    self.port = int(self.bootstrap_servers.rsplit(":", 1)[1])
                    self._ready.set()

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM (clean shutdown: flush, checkpoint, close) and wait; returns the exit code."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._join_pump()
        return self._proc.returncode

    def kill(self) -> None:
        """SIGKILL to the broker and its helper processes: no flush, no checkpoint — a crash."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        self._join_pump()

    def restart(self) -> EmbeddedBroker:
        """Stop cleanly and start again on the same port and data directory."""
        self.stop()
        return self.start()

    def _join_pump(self) -> None:
        if self._pump is not None:
            self._pump.join(timeout=5)
            self._pump = None

    def close(self) -> None:
        self.stop()
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start() if not self.running else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with contextlib.suppress(Exception):
            self.close()
