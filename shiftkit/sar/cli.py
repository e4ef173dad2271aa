"""``shiftkit sar``: extract | apply | merge | sweep | export-peft (see docs/sar.md).

Every input is a config field, so one YAML file is the whole job (``shiftkit sar merge -c merge.yaml``):
the models and the output (``base``, ``tuned``, ``core``, ``experts``, ``out``) are fields next to the
method's options; ``--base`` etc. are aliases of them.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from shiftkit.cliargs import add_config_args, config_from_args
from shiftkit.errors import ShiftkitError
from shiftkit.sar.pipeline import ApplyConfig, ExtractConfig, MergeConfig, SweepConfig


def _need(cmd: str, cfg, *keys: str) -> None:
    missing = [k for k in keys if not getattr(cfg, k)]
    if missing:
        raise ShiftkitError(f"sar {cmd} needs {', '.join(f'{k}=...' for k in missing)} "
                            f"(or {', '.join('--' + k for k in missing)})")


def _options(cfg, cls):
    """The pipeline's part of a command config (the fields of ``cls``)."""
    return cls(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls)})


@dataclasses.dataclass
class ExtractJob(ExtractConfig):
    base: str = ""  # base model directory
    tuned: str = ""  # RL-tuned model directory (same base)
    out: str = ""  # output core directory

    def validate(self) -> None:
        super().validate()
        _need("extract", self, "base", "tuned", "out")


@dataclasses.dataclass
class ApplyJob(ApplyConfig):
    base: str = ""  # base model directory (the one the core was extracted against)
    core: str = ""  # core directory written by sar extract
    out: str = ""  # output directory: the edited HF checkpoint

    def validate(self) -> None:
        _need("apply", self, "base", "core", "out")


@dataclasses.dataclass
class MergeJob(MergeConfig):
    base: str = ""  # base model directory the experts were fine-tuned from
    experts: list[str] = dataclasses.field(default_factory=list)  # expert model directories (same base), comma-separated or --experts A B
    out: str = ""  # output directory: the merged HF checkpoint
    overwrite: bool = False  # replace an existing, non-empty out directory

    def validate(self) -> None:
        super().validate()
        _need("merge", self, "base", "experts", "out")


@dataclasses.dataclass
class SweepJob(SweepConfig):
    base: str = ""  # base model directory
    tuned: str = ""  # RL-tuned model directory (same base)
    out: str = ""  # output directory: one core per delta rank and sweep.json

    def validate(self) -> None:
        super().validate()
        _need("sweep", self, "base", "tuned", "out")


@dataclasses.dataclass
class ExportPeftJob:
    core: str = ""  # core directory written by sar extract
    out: str = ""  # output directory: the PEFT LoRA adapter
    base: str = ""  # base_model_name_or_path to record ("" = the core's base)

    def validate(self) -> None:
        _need("export-peft", self, "core", "out")


def _extract(args):
    from shiftkit.sar.pipeline import extract

    cfg = config_from_args(ExtractJob, args)
    s = extract(cfg.base, cfg.tuned, cfg.out, _options(cfg, ExtractConfig))
    print(f"sar extract: {s['matrices']} matrices, core {s['param_fraction']:.4%} of the parameters, "
          f"energy kept {s['energy'].get('energy_total', float('nan')):.3f}, {s['seconds']:.1f}s -> {s['core']}",
          file=sys.stderr)
    return s


def _apply(args):
    from shiftkit.sar.pipeline import apply

    cfg = config_from_args(ApplyJob, args)
    s = apply(cfg.base, cfg.core, cfg.out, _options(cfg, ApplyConfig))
    print(f"sar apply: {s['matrices']} matrices edited -> {s['out']}", file=sys.stderr)
    return s


def _merge(args):
    from shiftkit.sar.pipeline import merge

    cfg = config_from_args(MergeJob, args)
    out = Path(cfg.out).expanduser()
    if out.is_dir() and any(out.iterdir()) and not cfg.overwrite:
        raise ShiftkitError(f"sar merge: out directory {out} exists and is not empty; pass another --out, "
                            "or overwrite=true to replace it")
    s = merge(cfg.base, cfg.experts, cfg.out, _options(cfg, MergeConfig))
    print(f"sar merge ({s['method']}): {s['experts']} experts -> {s['out']} in {s['seconds']:.1f}s", file=sys.stderr)
    return s


def _sweep(args):
    from shiftkit.sar.pipeline import sweep

    cfg = config_from_args(SweepJob, args)
    s = sweep(cfg.base, cfg.tuned, cfg.out, _options(cfg, SweepConfig))
    for r in s["ranks"]:
        print(f"sar sweep: delta_rank={r['delta_rank']}: core {r['param_fraction']:.4%}, "
              f"energy kept {r.get('mean_energy_total', float('nan')):.3f}", file=sys.stderr)
    return s


def _export_peft(args):
    from shiftkit.sar.pipeline import export_peft

    cfg = config_from_args(ExportPeftJob, args)
    return {"peft": str(export_peft(cfg.core, cfg.out, cfg.base or None))}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sar", help="SAR: spectral rewiring of RL updates (extract, apply, merge, sweep)",
                       description="Subspace-Aligned Rewiring (arXiv 2607.03065) over HF safetensors checkpoints.")
    ss = p.add_subparsers(dest="sar_command", metavar="SUBCOMMAND")
    io = {"--base": "base", "--out": "out"}

    e = ss.add_parser("extract", help="write the SAR core of (base, tuned); key=value options: delta_rank, "
                      "base_rank, mask, projection, core_dtype, edited_out, peft_out, ...")
    add_config_args(e, {**io, "--tuned": "tuned"}, config="shiftkit.sar.cli:ExtractJob")
    e.set_defaults(func=_extract)

    a = ss.add_parser("apply", help="rebuild the edited checkpoint from base + core")
    add_config_args(a, {**io, "--core": "core"}, config="shiftkit.sar.cli:ApplyJob")
    a.set_defaults(func=_apply)

    m = ss.add_parser("merge", help="merge RL experts sharing a base (sar, task_arithmetic, ties, dare_ties, "
                      "dare_linear); a parameter the method does not take is an error")
    add_config_args(m, {**io, "--experts": "experts", "--method": "method"}, config="shiftkit.sar.cli:MergeJob",
                    experts={"nargs": "+"})
    m.set_defaults(func=_merge)

    w = ss.add_parser("sweep", help="one core per delta rank from one decomposition (delta_ranks=0.005,0.01,0.05)")
    add_config_args(w, {**io, "--tuned": "tuned"}, config="shiftkit.sar.cli:SweepJob")
    w.set_defaults(func=_sweep)

    x = ss.add_parser("export-peft", help="write a core as a PEFT LoRA adapter")
    add_config_args(x, {"--core": "core", "--out": "out", "--base": "base"}, config="shiftkit.sar.cli:ExportPeftJob")
    x.set_defaults(func=_export_peft)
