"""A chaos run's report: the JSON (histories, faults, verdicts) and a timeline PNG a person can read.

``timeline`` draws, over the run's time (seconds from the history's origin):

- each fault as a shaded band from its start to its heal, labelled ``<nemesis>@<node>`` (a thin
  line continues to when the ISR was whole again);
- throughput: acknowledged operations per second (``ok`` completions, 1 s bins);
- latency: each acknowledged operation's invoke-to-ok time (points), and per-bin maximum;
- anomalies: a red vertical line at the time of each anomalous operation (its invoke), with the
  anomaly's name.

matplotlib (the ``dev`` extra) draws it with the non-interactive Agg backend; without matplotlib
``timeline`` returns ``None`` and the JSON alone is written.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.chaos.checker import Op

NEMESIS_COLOURS = {
    "isolate": "#f4a582", "isolate-leader": "#d6604d", "isolate-controller": "#b2182b", "one-way": "#fddbc7",
    "bridge": "#e7d4e8", "loss": "#d1e5f0", "kill": "#92c5de", "pause": "#4393c3", "disk-full": "#bababa",
    "over-budget": "#878787",
}  # fmt: skip


def latencies(ops: Iterable[Op]) -> list[tuple[float, float]]:
    """``(ok time, invoke-to-ok seconds)`` of every acknowledged operation (by process and value)."""
    invoked: dict[tuple[str, str], float] = {}
    out = []
    for op in ops:
        if op.type == "invoke":
            invoked[(op.process, op.value)] = op.time
        elif op.type == "ok" and (op.process, op.value) in invoked:
            out.append((op.time, op.time - invoked[(op.process, op.value)]))
    return sorted(out)


def anomaly_times(ops: Iterable[Op], anomalies: Mapping[str, Sequence[Any]]) -> list[tuple[float, str]]:
    """A time for each anomaly example: its value's invoke, else its own ``time``/``at`` field."""
    invoked = {op.value: op.time for op in ops if op.type == "invoke"}
    marks = []
    for name, examples in anomalies.items():
        for ex in examples:
            if not isinstance(ex, dict):
                continue
            t = invoked.get(ex.get("value", ""), ex.get("time", ex.get("at")))
            if isinstance(t, int | float):
                marks.append((float(t), name))
    return marks


def timeline(
    path: Path, ops: Sequence[Op], faults: Sequence[Mapping[str, Any]], marks: Sequence[tuple[float, str]],
    title: str,
) -> Path | None:  # fmt: skip
    """Draw the timeline PNG at ``path`` (see the module docstring); ``None`` without matplotlib."""
    try:
        import matplotlib as mpl

        mpl.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    lat = latencies(ops)
    end = max([op.time for op in ops] + [f.get("recovered") or f.get("heal") or 0 for f in faults] + [1.0])
    fig, (ax_t, ax_l) = plt.subplots(2, 1, figsize=(14, 7), sharex=True)
    for ax in (ax_t, ax_l):
        for f in faults:
            start, heal = f["start"], f.get("heal") or end
            ax.axvspan(start, heal, color=NEMESIS_COLOURS.get(f["nemesis"], "#cccccc"), alpha=0.6, lw=0)
            if f.get("recovered"):
                ax.plot([heal, f["recovered"]], [0, 0], color="black", lw=3, solid_capstyle="butt")
        for t, _name in marks:
            ax.axvline(t, color="red", lw=1)
    bins = Counter(int(t) for t, _ in lat)
    seconds = list(range(int(end) + 1))
    ax_t.plot(seconds, [bins.get(s, 0) for s in seconds], color="black", lw=1)
    ax_t.set_ylabel("acknowledged / s")
    ax_t.set_title(title, pad=70)
    top = max(bins.values(), default=1)
    for f in faults:
        ax_t.text(f["start"], top * 1.02, f"{f['nemesis']}@{f['target']}", rotation=90, fontsize=7, va="bottom")
    for t, name in marks:
        ax_t.text(t, top * 0.5, name, color="red", rotation=90, fontsize=8)
    if lat:
        ax_l.scatter([t for t, _ in lat], [d * 1000 for _, d in lat], s=1, color="#444444")
        worst: dict[int, float] = {}
        for t, d in lat:
            worst[int(t)] = max(worst.get(int(t), 0.0), d * 1000)
        ax_l.plot(sorted(worst), [worst[s] for s in sorted(worst)], color="#b2182b", lw=1, label="max per second")
        ax_l.set_yscale("log")
        ax_l.legend(loc="upper right")
    ax_l.set_ylabel("invoke → ok latency (ms)")
    ax_l.set_xlabel("seconds since the workload started (bands: faults until healed; black bar: until recovered)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def write(directory: Path, name: str, report: dict[str, Any], ops: Sequence[Op],
          anomalies: Mapping[str, Sequence[Any]]) -> tuple[Path, Path | None]:  # fmt: skip
    """``<name>.json`` and ``<name>.png`` in ``directory``; prints both paths and the summary."""
    json_path = directory / f"{name}.json"
    json_path.write_text(json.dumps(report, indent=1, default=str))
    png = timeline(directory / f"{name}.png", ops, report.get("faults", []), anomaly_times(ops, anomalies),
                   f"{name}: seed {report.get('seed')}, {len(report.get('faults', []))} faults")  # fmt: skip
    summary = {k: v for k, v in report.items() if not k.endswith("history") and k not in ("faults", "reads", "commits")}
    print(f"chaos report: {json_path}\nchaos timeline: {png}\n{json.dumps(summary, indent=1, default=str)[:3000]}")
    return json_path, png
