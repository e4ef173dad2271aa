"""``shiftkit kernels agent | bench | serve | rft`` (registered through ``shiftkit.kernels.cli.OPTIONAL_MODULES``)."""

from __future__ import annotations

import glob


def _cfg(args):
    from shiftkit.agent.episode import AgentConfig
    from shiftkit.config import load_config

    return load_config(AgentConfig, args.config, args.overrides)


def cmd_agent(args) -> dict:
    from shiftkit.agent.bench import make_client
    from shiftkit.agent.episode import run_episode
    from shiftkit.kernels import load_problem

    cfg = _cfg(args)
    p = load_problem(args.problem)
    res = run_episode(p, make_client(args.model, p.name, args.solutions, args.temperature), cfg, args.out)
    res.pop("events")
    if not args.json:
        c = res["counts"]
        print(f"outcome {res['outcome']}  final reward {res['final_reward']:+g}  turns {c['turns']}  tool calls {c['tool_calls']}  "
              f"malformed {c['malformed']}  ({res['timings']['total_s']} s)\ntrajectory: {args.out}")
        if res["error"]:
            print(f"error: {res['error']}")
    return res


def cmd_bench(args) -> dict:
    from shiftkit.agent.bench import run_bench

    s = run_bench(args.model, args.problems, _cfg(args), args.out, args.solutions)
    if not args.json:
        for name, m in [("overall", s["overall"]), *s["per_level"].items()]:
            ge = m["geomean_speedup_eager"]
            gc = m["geomean_speedup_compile"]
            print(f"{name:8s} n={m['n']:3d}  pass {m['pass_rate']:.0%}  faster-than-eager {m['faster_than_eager_rate']:.0%}  "
                  f"faster-than-compile {m['faster_than_compile_rate']:.0%}  geomean vs eager {ge or float('nan'):.2f}x  "
                  f"vs compile {gc or float('nan'):.2f}x")
        print(f"wrote {args.out}/bench.json and one trajectory per problem")
    return s


def cmd_serve(args) -> None:
    from shiftkit.agent.server import serve

    serve(args.model, args.host, args.port)


def cmd_rft(args) -> dict:
    from shiftkit.agent.rft import build_rft_dataset

    paths = sorted(p for g in args.trajectories for p in glob.glob(g))
    s = build_rft_dataset(paths, args.out)
    if not args.json:
        print(f"kept {s['kept']} of {s['trajectories']} trajectories -> {s['out']}  ({s['reasons']})")
    return s


def register_kernels(ksub) -> None:
    from shiftkit.cli import add_config_args

    p = ksub.add_parser("agent", help="run the kernel agent on one problem (ReAct loop with tools)")
    p.add_argument("--problem", required=True)
    p.add_argument("--model", required=True, help="OpenAI-compatible base URL, HF model dir, or 'scripted'")
    p.add_argument("--solutions", default=None, help="known solutions for --model scripted (default: the fixtures)")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--out", default="runs/agent/episode.jsonl", help="trajectory JSONL")
    add_config_args(p)
    p.set_defaults(func=cmd_agent)

    p = ksub.add_parser("bench", help="run the agent over a problem directory; pass rate, faster-than rates, geomean")
    p.add_argument("--model", required=True, help="OpenAI-compatible base URL, HF model dir, or 'scripted'")
    p.add_argument("--problems", required=True)
    p.add_argument("--solutions", default=None)
    p.add_argument("--out", default="runs/agent/bench")
    add_config_args(p)
    p.set_defaults(func=cmd_bench)

    p = ksub.add_parser("serve", help="serve a local HF model on an OpenAI-compatible endpoint (loopback)")
    p.add_argument("--model", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8011)
    p.set_defaults(func=cmd_serve)

    p = ksub.add_parser("rft", help="filter agent trajectories into a chat SFT dataset (rejection fine-tuning)")
    p.add_argument("trajectories", nargs="+", help="trajectory JSONL files or globs")
    p.add_argument("--out", default="runs/agent/rft.jsonl")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_rft)
