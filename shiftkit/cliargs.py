"""The command-line grammar every ``shiftkit`` command shares (a leaf: the CLI modules import it).

Every input of a command is a field of its config dataclass, set by ``--config FILE`` (YAML/JSON)
and ``key=value`` overrides (later wins). A ``--flag`` is only an alias of one field (``--model M``
is ``model=M``) and wins over the config file. With ``--json`` the summary is printed as JSON.

A command names its config class as a ``"module:Class"`` string (:func:`add_config_args`), imported
only when ``--help`` asks for the keys: ``--help`` then lists every key with its default and meaning
(:func:`shiftkit.config.config_help`) under the usage.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from shiftkit.config import config_help, load_config, parse_overrides


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose help ends with the config keys of its command (``config_class``).

    Sub-command parsers are of the same class (``add_subparsers`` makes its parsers of the parent's type)."""

    def format_help(self) -> str:
        text = super().format_help()
        spec = self.get_default("config_class")
        return text + "\n" + config_help(config_class(spec)) + "\n" if spec else text


def config_class(spec: str) -> type:
    """The class a ``"package.module:Class"`` string names."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def add_config_args(p: argparse.ArgumentParser, aliases: dict[str, str] | None = None, *, config: str = "",
                    **flag_kw) -> None:
    """``--config FILE``, ``key=value`` overrides, ``--json``, and ``--flag`` aliases of config fields.

    ``config``: the command's config class, ``"module:Class"`` (listed by ``--help``). ``aliases`` maps a
    flag (``"--model"``) to the field it sets (``"model"``); ``flag_kw`` may give a flag's argparse extras
    by field name (e.g. ``experts={"nargs": "+"}``).
    """
    if config:
        p.set_defaults(config_class=config)
    p.add_argument("--config", "-c", default=None, help="YAML or JSON config file")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    for flag, key in (aliases or {}).items():
        p.add_argument(flag, dest=f"alias:{key}", default=None, help=f"alias of {key}=VALUE",
                       **flag_kw.get(key, {}))


def overrides_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ``key=value`` overrides with the flag aliases merged in (a flag wins)."""
    over: dict[str, Any] = parse_overrides(getattr(args, "overrides", None))
    for k, v in vars(args).items():
        if k.startswith("alias:") and v is not None:
            over[k.split(":", 1)[1]] = v
    return over


def config_from_args(cls: type, args: argparse.Namespace, base: dict[str, Any] | None = None):
    """Load ``cls`` from defaults <- ``base`` <- ``--config`` <- ``key=value`` <- flag aliases."""
    return load_config(cls, getattr(args, "config", None), overrides_of(args), base=base)


def print_summary(summary: dict, args) -> dict:
    """The summary's scalar entries on stderr, one ``key: value`` a line (unless ``--json``); under
    ``accelerate launch`` / ``torchrun`` only rank 0 prints (every rank returns the same summary)."""
    if not getattr(args, "json", False) and os.environ.get("RANK", "0") == "0":
        for k, v in summary.items():
            if not isinstance(v, (dict, list)):
                print(f"{k}: {v}", file=sys.stderr)
    return summary
