"""``shiftkit opd [--student S --teacher T --teacher-ref R] [--config F] [key=value ...] [--json]``.

The flags are aliases of the ``student``, ``teacher`` and ``teacher_ref`` fields of :class:`OPDConfig`.
"""

from __future__ import annotations

from shiftkit.cliargs import add_config_args, config_from_args, print_summary


def cmd_opd(args) -> dict:
    from shiftkit.opd.loop import OPDConfig, run_opd

    return print_summary(run_opd(config_from_args(OPDConfig, args)), args)


def register(sub) -> None:
    p = sub.add_parser("opd", help="Direct-OPD: transfer a weak model's RL shift to a student (and baselines)",
                       description="Direct-OPD (arXiv 2607.05394). method=direct_opd|vanilla_opd|grpo; "
                       "reward_mode=student_topk|sampled|full_vocab; stages=[...] in a config file for composition.")
    add_config_args(p, {"--student": "student", "--teacher": "teacher", "--teacher-ref": "teacher_ref", "--out": "out"},
                    config="shiftkit.opd.loop:OPDConfig")
    p.set_defaults(func=cmd_opd)
