"""PNG plots for reports (matplotlib, Agg backend, written atomically)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

from shiftkit.io import atomic_write_bytes


def _fig():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: str | Path) -> None:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def line_plot(path, series: dict[str, tuple[Sequence[float], Sequence[float]]], title: str, xlabel: str,
              ylabel: str, logx: bool = False, ylim: tuple[float, float] | None = None) -> None:
    """One line per named (xs, ys) series."""
    plt = _fig()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, (xs, ys) in series.items():
        ax.plot(list(xs), list(ys), marker="o" if len(xs) < 12 else None, ms=3, label=name)
    if logx:
        ax.set_xscale("log", base=2)
    if ylim:
        ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    _save(plt, fig, path)


def smooth(ys: Sequence[float], w: int = 5) -> list[float]:
    out, acc = [], []
    for y in ys:
        acc.append(y)
        if len(acc) > w:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out
