"""``shiftkit opd --student S --teacher T --teacher-ref R [--config F] [key=value ...] [--json]``."""

from __future__ import annotations

import sys

from shiftkit.cli import add_config_args
from shiftkit.config import load_config, parse_overrides


def cmd_opd(args) -> dict:
    from shiftkit.opd.loop import OPDConfig, run_opd

    extra = {k: v for k, v in (("student", args.student), ("teacher", args.teacher),
                               ("teacher_ref", args.teacher_ref)) if v}
    overrides = {**parse_overrides(args.overrides), **extra}  # flags win over the config file
    cfg = load_config(OPDConfig, args.config, overrides)
    summary = run_opd(cfg)
    if not args.json:
        for k, v in summary.items():
            if not isinstance(v, (dict, list)):
                print(f"{k}: {v}", file=sys.stderr)
    return summary


def register(sub) -> None:
    p = sub.add_parser("opd", help="Direct-OPD: transfer a weak model's RL shift to a student (and baselines)",
                       description="Direct-OPD (arXiv 2607.05394). method=direct_opd|vanilla_opd|grpo; "
                       "reward_mode=student_topk|sampled|full_vocab; stages=[...] in a config file for composition.")
    p.add_argument("--student", default=None, help="student model (HF dir or hub id)")
    p.add_argument("--teacher", default=None, help="post-RL teacher")
    p.add_argument("--teacher-ref", dest="teacher_ref", default=None, help="the teacher before RL")
    add_config_args(p)
    p.set_defaults(func=cmd_opd)
