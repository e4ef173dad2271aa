"""The ``shiftkit`` command line.

Each command group lives in its own module that exposes ``register(subparsers)``; the module adds
its parser(s) and sets ``func`` (a callable taking the parsed ``argparse.Namespace`` and returning a
JSON-serialisable summary dict or ``None``). With ``--json`` the summary is printed as JSON.

User errors (:class:`shiftkit.errors.ShiftkitError`) print one line ``error: ...`` and exit 2.
"""

from __future__ import annotations

import os

# OpenMP threads that spin while waiting collapse throughput when cores are shared (measured 5-10x
# on this 2-core machine); must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import importlib  # noqa: E402
import sys  # noqa: E402
from typing import Any

from shiftkit.errors import ShiftkitError

# Command modules, in the order they appear in ``shiftkit --help``.
COMMAND_MODULES = [
    "shiftkit.commands.core",  # world, sft, rl, eval, demo, experiment
    "shiftkit.opd.cli",  # opd
    "shiftkit.sar.cli",  # sar
    "shiftkit.kernels.cli",  # kernels
]


def add_config_args(p: argparse.ArgumentParser) -> None:
    """The standard config arguments: ``--config FILE``, ``key=value`` overrides, ``--json``."""
    p.add_argument("--config", "-c", default=None, help="YAML or JSON config file")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shiftkit",
        description="shiftkit: reuse what reinforcement learning taught one model "
        "(GRPO, Direct-OPD, SAR, kernel-agent RL).",
    )
    from shiftkit import __version__

    parser.add_argument("--version", action="version", version=f"shiftkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):
                continue  # that command group is not part of this build
            raise
        mod.register(sub)
    return parser


def _print_json(obj: Any) -> None:
    from shiftkit.io import dumps

    print(dumps(obj))


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        summary = args.func(args)
    except ShiftkitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    if getattr(args, "json", False) and summary is not None and os.environ.get("RANK", "0") == "0":
        _print_json(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
