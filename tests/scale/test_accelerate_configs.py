"""configs/accelerate/*.yaml parse with accelerate's own loader and say what their names say, and every
setting they pass to the launched processes is one shiftkit honours (shiftkit.dist.launcher_plan)."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "accelerate"
EXPECTED = {  # file -> (distributed_type, num_processes, extra check)
    "cpu_gloo.yaml": ("MULTI_GPU", 2, lambda c: c.mixed_precision == "no"),
    "single_gpu.yaml": ("NO", 1, lambda c: c.mixed_precision == "bf16"),
    "fsdp.yaml": ("FSDP", 8, lambda c: int(c.fsdp_config["fsdp_version"]) == 2 and c.mixed_precision == "bf16"),
    "fsdp_cpu_gloo.yaml": ("FSDP", 2, lambda c: int(c.fsdp_config["fsdp_version"]) == 2 and c.mixed_precision == "no"),
}  # no DeepSpeed config: shiftkit's loops refuse DeepSpeed (shiftkit.dist), docs/scale.md says why


def test_every_config_is_listed():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_parses(name):
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file

    cfg = load_config_from_file(str(CONFIGS / name))
    assert isinstance(cfg, ClusterConfig)
    dtype, n, check = EXPECTED[name]
    assert str(cfg.distributed_type).split(".")[-1] == dtype
    assert cfg.num_processes == n
    assert check(cfg)


@pytest.mark.parametrize("name", ["fsdp.yaml", "fsdp_cpu_gloo.yaml"])
def test_fsdp_configs_are_honoured(name):
    """The FSDP env accelerate's launcher derives from the config (``prepare_multi_gpu_env``) is accepted."""
    import argparse

    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    from shiftkit.dist import launcher_plan

    args = launch_command_parser().parse_args(["--config_file", str(CONFIGS / name), "x.py"])
    args, _, _ = _validate_launch_command(args)
    env = prepare_multi_gpu_env(argparse.Namespace(**vars(args)))
    plan = launcher_plan({**env, "WORLD_SIZE": "2"})
    assert plan.strategy == "fsdp" and plan.wrap == "TRANSFORMER_BASED_WRAP"
    assert plan.autocast == ("bfloat16" if name == "fsdp.yaml" else "none")
