"""py-spy sampling of a process for the length of a ``with`` block, and a summary of the samples
by area of the code base (``broker_throughput.py --profile``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

# py-spy names frames "function (path:line)", paths relative to sys.path entries.
AREAS = [
    ("broker/network", "(broker/network/"),
    ("broker/api", "(broker/api/"),
    ("pyspark_log/wire", "(pyspark_log/wire/"),
    ("<generated wire codecs>", "(<pylog.wire"),
    ("broker/log", "(broker/log/"),
    ("broker/replication", "(broker/replication/"),
    ("broker/coordinator", "(broker/coordinator/"),
    ("pyspark_log/records", "(pyspark_log/records/"),
    ("asyncio", "(asyncio/"),
]


class Profiler:
    """py-spy sampling the broker for the length of a ``with`` block (raw collapsed stacks)."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out = pid, out
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Profiler:
        spy = Path(sys.executable).with_name("py-spy")
        self._proc = subprocess.Popen(
            [str(spy), "record", "--pid", str(self.pid), "--format", "raw", "--function", "--nonblocking",
             "--rate", "500", "--output", str(self.out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(0.5)  # let it attach
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGINT)
        self._proc.wait(30)


def summarize_profile(raw: str, title: str, top: int = 15) -> None:
    own: Counter[str] = Counter()
    area_incl: Counter[str] = Counter()
    total = 0
    idle = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        leaf = frames[-1]
        if "select (selectors.py" in leaf or "poll (selectors.py" in leaf:
            idle += count
        own[leaf] += count
        for name, marker in AREAS:
            if any(marker in f for f in frames):
                area_incl[name] += count
    if not total:
        print(f"  {title}: no samples (is py-spy allowed to attach?)")
        return
    print(f"\n  profile, {title}: {total} samples, {100 * idle / total:.0f}% waiting in select")
    print("    inclusive share by area (a sample counts for every area on its stack):")
    for name, _ in AREAS:
        print(f"      {name:<26} {100 * area_incl[name] / total:5.1f}%")
    print(f"    top {top} functions by own time:")
    for frame, count in own.most_common(top):
        print(f"      {100 * count / total:5.1f}%  {frame[:110]}")
