"""Running a command with its stderr on a pseudo-terminal, as a person at a terminal runs it (the
CLI's progress bars are drawn only there)."""

from __future__ import annotations

import os
import pty
import select
import subprocess

from tests.waiting import Deadline


def run_on_pty(argv: list[str], deadline_s: float = 90.0) -> tuple[int, str, str]:
    """Run ``argv`` with stderr on a pseudo-terminal; (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = bytearray()
    deadline = Deadline(deadline_s)
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
        assert not deadline.expired(), "the command on the pseudo-terminal did not finish"
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    return proc.wait(timeout=deadline_s), out, seen.decode(errors="replace")
