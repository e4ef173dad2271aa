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


def energy_angle_plot(path, rows: dict[str, dict]) -> None:
    """SAR diagnostics by matrix (checkpoint order): the energy an edit keeps (top) and the principal
    angles of the update's subspaces to the base's (bottom). ``rows``: name -> the matrix's diagnostics."""
    plt = _fig()
    names = list(rows)
    fig, axes = plt.subplots(2, 1, figsize=(max(6, 0.12 * len(names) + 4), 6), sharex=True)
    x = list(range(len(names)))
    for key, label in (("energy_lowrank", "||dW_k||²/||dW||²"), ("energy_projection", "||P dW_k||²/||dW_k||²"),
                       ("energy_total", "||P dW_k||²/||dW||²")):
        axes[0].plot(x, [rows[n].get(key, float("nan")) for n in names], marker=".", label=label)
    axes[0].set_ylabel("energy kept")
    axes[0].set_ylim(0, 1.05)
    axes[0].legend(fontsize=7)
    for key, label in (("angle_left_mean", "mean angle, left"), ("angle_right_mean", "mean angle, right")):
        axes[1].plot(x, [rows[n].get(key, float("nan")) for n in names], marker=".", label=label)
    axes[1].set_ylabel("principal angle to base (deg)")
    axes[1].set_xlabel("matrix (checkpoint order)")
    axes[1].legend(fontsize=7)
    step = max(1, len(names) // 30)
    axes[1].set_xticks(x[::step])
    axes[1].set_xticklabels([n.replace("model.layers.", "L").replace(".weight", "") for n in names[::step]],
                            rotation=90, fontsize=6)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
