"""``shiftkit agent run | bench | serve | rft | synth | train``.

Every input is a config field (``--config F`` and ``key=value``); the flags are aliases. ``run`` and
``bench`` take every :class:`~shiftkit.agent.episode.AgentConfig` field plus their own inputs.
"""

from __future__ import annotations

import dataclasses
import glob

from shiftkit.agent.rl import AgenticRLConfig
from shiftkit.agent.episode import AgentConfig
from shiftkit.agent.synth import SynthConfig
from shiftkit.cliargs import add_config_args, config_from_args
from shiftkit.errors import ShiftkitError


def _episode_config(cfg) -> AgentConfig:
    """The :class:`AgentConfig` part of a command config (what the episode reads)."""
    return AgentConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(AgentConfig)})


@dataclasses.dataclass
class AgentRunConfig(AgentConfig):
    problem: str = ""  # KernelBench-format problem file
    model: str = ""  # OpenAI-compatible base URL, HF model dir, or 'scripted'
    solutions: str = ""  # known solutions for model=scripted ("" = the fixtures)
    temperature: float = 0.0
    out: str = "runs/agent/episode.jsonl"  # trajectory JSONL

    def validate(self) -> None:
        super().validate()
        if not self.problem or not self.model:
            raise ShiftkitError("agent run needs problem=<file> and model=<url, model dir or scripted>")


@dataclasses.dataclass
class AgentBenchConfig(AgentConfig):
    model: str = ""  # OpenAI-compatible base URL, HF model dir, or 'scripted'
    problems: str = ""  # directory of problem files
    solutions: str = ""
    out: str = "runs/agent/bench"

    def validate(self) -> None:
        super().validate()
        if not self.problems or not self.model:
            raise ShiftkitError("agent bench needs problems=<dir> and model=<url, model dir or scripted>")


@dataclasses.dataclass
class ServeConfig:
    model: str = ""
    host: str = "127.0.0.1"
    port: int = 8011

    def validate(self) -> None:
        if not self.model:
            raise ShiftkitError("agent serve needs model=<HF model dir>")


@dataclasses.dataclass
class RFTConfig:
    trajectories: list[str] = dataclasses.field(default_factory=list)  # trajectory JSONL files or globs
    out: str = "runs/agent/rft.jsonl"

    def validate(self) -> None:
        if not self.trajectories:
            raise ShiftkitError("agent rft needs trajectories=[files or globs]")


@dataclasses.dataclass
class SynthRunConfig(SynthConfig):
    mine: bool = False  # only report the torch operator catalogue


def cmd_run(args) -> dict:
    from shiftkit.agent.bench import make_client
    from shiftkit.agent.episode import run_episode
    from shiftkit.kernels import load_problem

    cfg = config_from_args(AgentRunConfig, args)
    p = load_problem(cfg.problem)
    res = run_episode(p, make_client(cfg.model, p.name, cfg.solutions or None, cfg.temperature), _episode_config(cfg),
                      cfg.out)
    res.pop("events")
    if not args.json:
        c = res["counts"]
        fr = "unscorable" if res["final_reward"] is None else f"{res['final_reward']:+g}"
        print(f"outcome {res['outcome']}  final reward {fr}  turns {c['turns']}  tool calls {c['tool_calls']}  "
              f"malformed {c['malformed']}  ({res['timings']['total_s']} s)\ntrajectory: {cfg.out}")
        if res["error"]:
            print(f"error: {res['error']}")
    return res


def cmd_bench(args) -> dict:
    from shiftkit.agent.bench import run_bench

    cfg = config_from_args(AgentBenchConfig, args)
    s = run_bench(cfg.model, cfg.problems, _episode_config(cfg), cfg.out, cfg.solutions or None)
    if not args.json:
        for name, m in [("overall", s["overall"]), *s["per_level"].items()]:
            ge = m["geomean_speedup_eager"]
            gc = m["geomean_speedup_compile"]
            print(f"{name:8s} n={m['n']:3d}  pass {m['pass_rate']:.0%}  faster-than-eager {m['faster_than_eager_rate']:.0%}  "
                  f"faster-than-compile {m['faster_than_compile_rate']:.0%}  geomean vs eager {ge or float('nan'):.2f}x  "
                  f"vs compile {gc or float('nan'):.2f}x")
        print(f"wrote {cfg.out}/bench.json and one trajectory per problem")
    return s


def cmd_serve(args) -> None:
    from shiftkit.agent.server import serve

    cfg = config_from_args(ServeConfig, args)
    serve(cfg.model, cfg.host, cfg.port)


def cmd_rft(args) -> dict:
    from shiftkit.agent.rft import build_rft_dataset

    files = [a for a in args.overrides if "=" not in a]  # positional trajectories alias trajectories=[...]
    args.overrides = [a for a in args.overrides if "=" in a]
    if files:
        setattr(args, "alias:trajectories", files)
    cfg = config_from_args(RFTConfig, args)
    paths = sorted(p for g in cfg.trajectories for p in glob.glob(g))
    s = build_rft_dataset(paths, cfg.out)
    if not args.json:
        print(f"kept {s['kept']} of {s['trajectories']} trajectories -> {s['out']}  ({s['reasons']})")
    return s


def cmd_synth(args) -> dict:
    from shiftkit.agent.synth import mine_torch_ops, run_synth

    cfg = config_from_args(SynthRunConfig, args)
    if cfg.mine:
        return mine_torch_ops()
    s = run_synth(SynthConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(SynthConfig)}),
                  progress=not args.json)
    if not args.json:
        print(f"candidates {s['candidates']}  admitted {s['admitted']}  ({s['seconds']} s)")
        print("rejected by filter: " + ", ".join(f"{k} {v}" for k, v in s["rejected"].items()))
        for d, v in s["per_depth"].items():
            print(f"  depth {d}: generated {v['generated']:4d}  admitted {v['admitted']:4d}")
        print(f"wrote {s['out']}/dataset.jsonl, rejected.jsonl, summary.json")
    return s


def cmd_train(args) -> dict:
    from shiftkit.agent.rl import run_agentic_rl

    return run_agentic_rl(config_from_args(AgenticRLConfig, args))


def register(sub) -> None:
    p = sub.add_parser("agent", help="the kernel agent: episodes, benchmark, server, RFT data, task synthesis, RL")
    asub = p.add_subparsers(dest="agent_command", metavar="AGENT_COMMAND")
    model = {"--model": "model"}

    r = asub.add_parser("run", help="run the kernel agent on one problem (ReAct loop with tools)")
    add_config_args(r, {"--problem": "problem", **model, "--solutions": "solutions", "--temperature": "temperature",
                        "--out": "out"}, config="shiftkit.agent.cli:AgentRunConfig")
    r.set_defaults(func=cmd_run)

    b = asub.add_parser("bench", help="run the agent over a problem directory; pass rate, faster-than rates, geomean")
    add_config_args(b, {**model, "--problems": "problems", "--solutions": "solutions", "--out": "out"},
                    config="shiftkit.agent.cli:AgentBenchConfig")
    b.set_defaults(func=cmd_bench)

    s = asub.add_parser("serve", help="serve a local HF model on an OpenAI-compatible endpoint (loopback)")
    add_config_args(s, {**model, "--host": "host", "--port": "port"}, config="shiftkit.agent.cli:ServeConfig")
    s.set_defaults(func=cmd_serve)

    f = asub.add_parser("rft", help="filter agent trajectories into a chat SFT dataset (rejection fine-tuning)")
    add_config_args(f, {"--out": "out"}, config="shiftkit.agent.cli:RFTConfig")  # positional file names (no '=') are trajectories=[...]
    f.set_defaults(func=cmd_rft)

    y = asub.add_parser("synth", help="synthesize fused-operator training problems and filter them")
    y.add_argument("--mine", dest="alias:mine", action="store_const", const=True, default=None,
                   help="alias of mine=true: only report the torch operator catalogue")
    add_config_args(y, {"--out": "out"}, config="shiftkit.agent.cli:SynthRunConfig")
    y.set_defaults(func=cmd_synth)

    t = asub.add_parser("train", help="multi-turn agentic RL (PPO with a critic, or GRPO): task=toy (the calculator "
                                      "tool task) or task=kernels (kernel problems, tools through the kernel environment)")
    add_config_args(t, {"--out": "out"}, config="shiftkit.agent.rl:AgenticRLConfig")
    t.set_defaults(func=cmd_train)
