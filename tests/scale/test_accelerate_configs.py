"""configs/accelerate/*.yaml parse with accelerate's own loader and say what their names say."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "accelerate"
EXPECTED = {  # file -> (distributed_type, num_processes, extra check)
    "cpu_gloo.yaml": ("MULTI_GPU", 2, lambda c: c.mixed_precision == "no"),
    "single_gpu.yaml": ("NO", 1, lambda c: c.mixed_precision == "bf16"),
    "fsdp.yaml": ("FSDP", 8, lambda c: int(c.fsdp_config["fsdp_version"]) == 2),
    "deepspeed_zero2.yaml": ("DEEPSPEED", 8, lambda c: int(c.deepspeed_config["zero_stage"]) == 2),
    "deepspeed_zero3.yaml": ("DEEPSPEED", 8, lambda c: int(c.deepspeed_config["zero_stage"]) == 3),
}


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
