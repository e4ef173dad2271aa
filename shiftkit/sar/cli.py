"""``shiftkit sar``: extract | apply | merge | sweep | export-peft (see docs/sar.md)."""

from __future__ import annotations

import argparse
import sys

from shiftkit.config import load_config


def _extract(args):
    from shiftkit.sar.pipeline import ExtractConfig, extract

    cfg = load_config(ExtractConfig, args.config, args.overrides)
    s = extract(args.base, args.tuned, args.out, cfg)
    print(f"sar extract: {s['matrices']} matrices, core {s['param_fraction']:.4%} of the parameters, "
          f"energy kept {s['energy'].get('energy_total', float('nan')):.3f}, {s['seconds']:.1f}s -> {s['core']}",
          file=sys.stderr)
    return s


def _apply(args):
    from shiftkit.sar.pipeline import ApplyConfig, apply

    cfg = load_config(ApplyConfig, args.config, args.overrides)
    s = apply(args.base, args.core, args.out, cfg)
    print(f"sar apply: {s['matrices']} matrices edited -> {s['out']}", file=sys.stderr)
    return s


def _merge(args):
    from shiftkit.sar.pipeline import MergeConfig, merge

    over = list(args.overrides or [])
    if args.method:
        over.append(f"method={args.method}")
    cfg = load_config(MergeConfig, args.config, over)
    s = merge(args.base, args.experts, args.out, cfg)
    print(f"sar merge ({s['method']}): {s['experts']} experts -> {s['out']} in {s['seconds']:.1f}s", file=sys.stderr)
    return s


def _sweep(args):
    from shiftkit.sar.pipeline import SweepConfig, sweep

    cfg = load_config(SweepConfig, args.config, args.overrides)
    s = sweep(args.base, args.tuned, args.out, cfg)
    for r in s["ranks"]:
        print(f"sar sweep: delta_rank={r['delta_rank']}: core {r['param_fraction']:.4%}, "
              f"energy kept {r.get('mean_energy_total', float('nan')):.3f}", file=sys.stderr)
    return s


def _export_peft(args):
    from shiftkit.sar.pipeline import export_peft

    return {"peft": str(export_peft(args.core, args.out, args.base))}


def register(sub: argparse._SubParsersAction) -> None:
    from shiftkit.cli import add_config_args

    p = sub.add_parser("sar", help="SAR: spectral rewiring of RL updates (extract, apply, merge, sweep)",
                       description="Subspace-Aligned Rewiring (arXiv 2607.03065) over HF safetensors checkpoints.")
    ss = p.add_subparsers(dest="sar_command", metavar="SUBCOMMAND")

    e = ss.add_parser("extract", help="write the SAR core of (base, tuned); key=value options: delta_rank, "
                      "base_rank, mask, projection, core_dtype, edited_out, peft_out, ...")
    e.add_argument("--base", required=True, help="base model directory")
    e.add_argument("--tuned", required=True, help="RL-tuned model directory (same base)")
    e.add_argument("--out", required=True, help="output core directory")
    add_config_args(e)
    e.set_defaults(func=_extract)

    a = ss.add_parser("apply", help="rebuild the edited checkpoint from base + core")
    a.add_argument("--base", required=True)
    a.add_argument("--core", required=True)
    a.add_argument("--out", required=True)
    add_config_args(a)
    a.set_defaults(func=_apply)

    m = ss.add_parser("merge", help="merge RL experts sharing a base (sar, task_arithmetic, ties, dare_ties, dare_linear)")
    m.add_argument("--base", required=True)
    m.add_argument("--experts", required=True, nargs="+")
    m.add_argument("--method", default=None, help="merge method (default: sar)")
    m.add_argument("--out", required=True)
    add_config_args(m)
    m.set_defaults(func=_merge)

    w = ss.add_parser("sweep", help="one core per delta rank from one decomposition (delta_ranks=0.005,0.01,0.05)")
    w.add_argument("--base", required=True)
    w.add_argument("--tuned", required=True)
    w.add_argument("--out", required=True)
    add_config_args(w)
    w.set_defaults(func=_sweep)

    x = ss.add_parser("export-peft", help="write a core as a PEFT LoRA adapter")
    x.add_argument("--core", required=True)
    x.add_argument("--out", required=True)
    x.add_argument("--base", default=None, help="base_model_name_or_path to record (default: the core's base)")
    x.add_argument("--json", action="store_true")
    x.set_defaults(func=_export_peft)
