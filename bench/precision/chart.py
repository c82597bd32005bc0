"""The lateness histograms, one per class, as a PNG."""

from __future__ import annotations

import math
from pathlib import Path

from bench.precision import log
from bench.precision.report import percentile
from bench.precision.shapes import BURST, CLASSES, CRON, HANDOFF, SCANNER, STEADY


def draw_histograms(path: Path, by_class: dict[str, dict[str, list[float]]], title: str) -> None:
    try:
        import matplotlib
    except ImportError as exc:
        raise SystemExit("--png needs matplotlib: .venv/bin/pip install -e '.[bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in CLASSES if by_class[k][HANDOFF] or by_class[k][SCANNER]]
    if not kinds:
        log("nothing was delivered: no histogram")
        return
    names = {STEADY: "steady load", BURST: "burst at one instant", CRON: "cron jobs at :00"}
    labels = {HANDOFF: "handed off by the API", SCANNER: "enqueued by a scanner tick"}
    figure, axes_list = plt.subplots(
        len(kinds), 1, figsize=(9, 2.6 * len(kinds) + 0.8), dpi=110, squeeze=False
    )
    for axes, kind in zip([a[0] for a in axes_list], kinds, strict=True):
        values = by_class[kind][HANDOFF] + by_class[kind][SCANNER]
        # Outliers far beyond p99 would squeeze the rest into one bar: they are counted, not drawn.
        p99 = percentile(values, 99) or 0.0
        high = max(values) if max(values) <= 3 * max(p99, 100.0) else 3 * max(p99, 100.0)
        low = min(min(values), 0.0)
        width = max(5.0, math.ceil((high - low) / 60 / 5) * 5)  # about 60 bars, in steps of 5 ms
        bins = [low + width * i for i in range(int((high - low) / width) + 2)]
        beyond = [v for v in values if v > bins[-1]]
        drawn = [p for p in (HANDOFF, SCANNER) if by_class[kind][p]]
        axes.hist(
            [by_class[kind][p] for p in drawn],
            bins=bins,
            stacked=True,
            label=[f"{labels[p]} ({len(by_class[kind][p])})" for p in drawn],
            color=["#4c72b0" if p == HANDOFF else "#dd8452" for p in drawn],
        )
        for p, style in ((50, ":"), (99, "--")):
            mark = percentile(values, p)
            assert mark is not None
            axes.axvline(mark, color="black", linestyle=style, linewidth=1, label=f"p{p} {mark:.0f} ms")
        axes.plot([], [], " ", label=f"max {max(values):.0f} ms")
        if beyond:
            axes.plot([], [], " ", label=f"{len(beyond)} later than {bins[-1]:.0f} ms not drawn")
        axes.set_title(f"{names[kind]}: {len(values)} executions", fontsize=10)
        axes.set_ylabel("executions")
        axes.legend(frameon=False, fontsize=8)
        axes.spines[["top", "right"]].set_visible(False)
    axes_list[-1][0].set_xlabel("lateness at the receiver: arrival - scheduled time (ms)")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)
