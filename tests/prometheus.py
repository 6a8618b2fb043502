"""A real Prometheus server for tests: Debian's ``/usr/bin/prometheus`` (``./dev test`` installs it,
``ensure_prometheus``) on a free loopback port, scraping given ``/metrics`` addresses every second
and evaluating given rule files every second.

    with PrometheusServer(root, {"1": "127.0.0.1:9101"}, rule_files=[rules]) as prom:
        prom.query("up")        # /api/v1/query: the instant vector's samples
        prom.alerts()           # /api/v1/alerts
        prom.targets()          # /api/v1/targets: the active targets

Each target gets the label ``node`` (the mapping's key); ``instance`` is its address. The
configuration is written as JSON (YAML's subset), so no YAML library is needed. ``shorten_for``
turns a checked-in rule file into a copy whose ``for:`` durations are short enough for a test.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from pyspark_log.embedded_cluster import free_port
from tests.waiting import Deadline

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
START_ATTEMPTS = 3
READY_TIMEOUT_S = 60.0

_FOR_LINE = re.compile(r"(?m)^(\s+for:\s*)\S+\s*$")
_ALERT_LINE = re.compile(r"(?m)^\s*-\s*alert:\s*(\S+)\s*$")


class PrometheusError(RuntimeError):
    """The HTTP API answered ``status: error`` (its ``errorType: error``), or not at all."""


def alert_names(rules_text: str) -> list[str]:
    """The ``alert:`` names of a rule file, in file order."""
    return _ALERT_LINE.findall(rules_text)


def shorten_for(rules_text: str, duration: str) -> str:
    """The rule file with every ``for:`` set to ``duration`` (each alert must have one ``for:`` line)."""
    out, count = _FOR_LINE.subn(lambda m: m.group(1) + duration, rules_text)
    if count != len(alert_names(rules_text)):
        raise ValueError(f"{count} `for:` lines for {len(alert_names(rules_text))} alerts: one each expected")
    return out


class PrometheusServer:
    """One ``prometheus`` process with a generated configuration; see the module docstring."""

    def __init__(
        self, root: Path, targets: Mapping[str, str], *, rule_files: Sequence[Path] = (),
        interval: str = "1s", job: str = "pylog",
    ) -> None:  # fmt: skip
        self.root = root
        self.targets_by_node = dict(targets)
        self.rule_files = [Path(p).resolve() for p in rule_files]
        self.interval = interval
        self.job = job
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        return {
            "global": {
                "scrape_interval": self.interval,
                "scrape_timeout": self.interval,
                "evaluation_interval": self.interval,
            },
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {
                    "job_name": self.job,
                    "static_configs": [
                        {"targets": [address], "labels": {"node": node}}
                        for node, address in self.targets_by_node.items()
                    ],
                }
            ],
        }

    def __enter__(self) -> PrometheusServer:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        """Started and answering ``/-/ready``; a port taken meanwhile is retried on another."""
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "prometheus.yml"
        config.write_text(json.dumps(self.config(), indent=2))
        for attempt in range(START_ATTEMPTS):
            self.port = free_port()
            log = self.root / "prometheus.log"
            with log.open("wb") as out:
                self._process = subprocess.Popen(
                    [
                        PROMETHEUS,
                        f"--config.file={config}",
                        f"--storage.tsdb.path={self.root / 'data'}",
                        f"--web.listen-address=127.0.0.1:{self.port}",
                        "--web.enable-lifecycle",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            if self._wait_ready():
                return
            self.close()
            if "address already in use" not in self.output() or attempt == START_ATTEMPTS - 1:
                raise RuntimeError(f"prometheus did not start:\n{self.output()}")

    def _wait_ready(self) -> bool:
        assert self._process is not None
        deadline = Deadline(READY_TIMEOUT_S)
        while not deadline.expired():
            if self._process.poll() is not None:
                return False
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as resp:
                if resp.status == 200:
                    return True
            time.sleep(0.1)
        return False

    def output(self) -> str:
        log = self.root / "prometheus.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)

    # -- the HTTP API ------------------------------------------------------------------------------
    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``: its ``data`` (``PrometheusError`` on ``status: error``)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=30) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:  # 400/422/503 carry the error document
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant query's result (a vector's samples; a scalar as one sample without labels)."""
        data = self.api("query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets", state="active")["activeTargets"])

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def rules(self) -> list[dict[str, Any]]:
        """Every loaded rule (``name``, ``query``, ``duration``, ``health``, ``lastError``, ...)."""
        return [rule for group in self.api("rules")["groups"] for rule in group["rules"]]
