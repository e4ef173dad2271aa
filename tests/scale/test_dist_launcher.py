"""What the launcher asked for is honoured or refused by name (shiftkit.dist.launcher_plan, Dist.apply),
and a checkpoint's trainer_state.pt is read with weights_only=True (a pickle is refused, not run).

The environment variables are the ones ``accelerate launch`` sets (accelerate 1.15, ``utils/launch.py``:
``prepare_multi_gpu_env`` for FSDP_* / ACCELERATE_USE_FSDP / ACCELERATE_MIXED_PRECISION,
``prepare_deepspeed_cmd_env`` for ACCELERATE_USE_DEEPSPEED)."""

import dataclasses
import os

import pytest
import torch

from shiftkit.dist import FSDP_REFUSED, Dist, launcher_plan
from shiftkit.errors import ShiftkitError

FSDP = {"WORLD_SIZE": "2", "RANK": "0", "ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2",
        "ACCELERATE_MIXED_PRECISION": "no", "FSDP_SHARDING_STRATEGY": "FULL_SHARD", "FSDP_OFFLOAD_PARAMS": "false",
        "FSDP_RESHARD_AFTER_FORWARD": "true", "FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",
        "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT", "FSDP_USE_ORIG_PARAMS": "true"}  # as fsdp_cpu_gloo.yaml gives


def test_plans():
    assert launcher_plan({}).strategy == "single"
    assert launcher_plan({"WORLD_SIZE": "2"}).strategy == "ddp"
    p = launcher_plan(FSDP)
    assert (p.strategy, p.autocast, p.reshard_after_forward, p.wrap) == ("fsdp", "none", True, "TRANSFORMER_BASED_WRAP")
    assert launcher_plan({**FSDP, "FSDP_RESHARD_AFTER_FORWARD": "false"}).reshard_after_forward is False
    assert launcher_plan({**FSDP, "FSDP_TRANSFORMER_CLS_TO_WRAP": "A, B"}).wrap_classes == ("A", "B")
    assert launcher_plan({"ACCELERATE_MIXED_PRECISION": "bf16"}).autocast == "bfloat16"
    assert launcher_plan({"ACCELERATE_MIXED_PRECISION": "fp16"}).autocast == "float16"


@pytest.mark.parametrize("env,names", [
    ({"WORLD_SIZE": "2", "ACCELERATE_USE_DEEPSPEED": "true"}, "DEEPSPEED"),
    ({"ACCELERATE_USE_MEGATRON_LM": "true"}, "MEGATRON_LM"),
    ({"ACCELERATE_USE_PARALLELISM_CONFIG": "true"}, "parallelism_config"),
    ({"ACCELERATE_DYNAMO_BACKEND": "INDUCTOR"}, "dynamo_backend=INDUCTOR"),
    ({"ACCELERATE_MIXED_PRECISION": "fp8"}, "mixed_precision=fp8"),
    ({"ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4"}, "gradient_accumulation_steps"),
    ({**FSDP, "FSDP_VERSION": "1"}, "fsdp_version=1"),
    ({**FSDP, "WORLD_SIZE": "1"}, "num_processes=1"),
    ({**FSDP, "FSDP_AUTO_WRAP_POLICY": "SIZE_BASED_WRAP"}, "fsdp_auto_wrap_policy=SIZE_BASED_WRAP"),
    ({**FSDP, "FSDP_RESHARD_AFTER_FORWARD": "2"}, "fsdp_reshard_after_forward=2"),
    *[({**FSDP, var: "bogus"}, f"{key}=bogus ({var})") for var, (key, _, _) in FSDP_REFUSED.items()],
])
def test_unsupported_settings_are_errors_naming_them(env, names):
    with pytest.raises(ShiftkitError, match=names.replace("(", r"\(").replace(")", r"\)")):
        launcher_plan(env)


@dataclasses.dataclass
class Cfg:
    autocast: str = "none"
    grad_checkpointing: bool = False
    frozen_placement: str = "auto"
    lora_r: int = 0


def test_apply_maps_and_refuses():
    c = Cfg()
    Dist(c, env={"ACCELERATE_MIXED_PRECISION": "bf16"})
    assert c.autocast == "bfloat16"
    Dist(c2 := Cfg(autocast="bfloat16"), env={})  # the key alone (a launcher that asked for nothing)
    assert c2.autocast == "bfloat16"
    with pytest.raises(ShiftkitError, match="autocast=float16 conflicts with the launcher's mixed_precision"):
        Dist(Cfg(autocast="float16"), env={"ACCELERATE_MIXED_PRECISION": "bf16"})
    with pytest.raises(ShiftkitError, match="frozen_placement=shard needs FSDP"):
        Dist(Cfg(frozen_placement="shard"), env={})
    with pytest.raises(ShiftkitError, match="frozen_placement must be one of"):
        Dist(Cfg(frozen_placement="whole"), env={})
    with pytest.raises(ShiftkitError, match="mixed_precision .* is not read by this command"):
        Dist(object(), env={"ACCELERATE_MIXED_PRECISION": "bf16"})


class _Payload:
    """Unpickling this runs ``os.system`` (what a foreign trainer_state.pt could do)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickled_object_in_a_checkpoint_is_refused(tmp_path, pico, tok):
    from shiftkit import loopkit as kit
    from shiftkit.runs import RunDir

    run = RunDir(tmp_path / "run", {"steps": 4})
    opt = kit.make_optimizer(pico, 1e-3, 0.0)
    pico(input_ids=torch.tensor([[5, 6, 7]])).logits.sum().backward()
    opt.step()
    ck = run.save_checkpoint(2, pico, tok, opt, extra={"alpha": 1.5, "curve": [0.1, 0.2]})
    ts = torch.load(ck / "trainer_state.pt", weights_only=True)  # what shiftkit writes loads as plain data
    assert ts["step"] == 2 and ts["extra"] == {"alpha": 1.5, "curve": [0.1, 0.2]}
    assert kit.resume(run, pico, opt, Dist(env={}), 4, "t", False).start == 2
    marker = tmp_path / "executed"
    torch.save({"step": 2, "optimizer": _Payload(marker), "extra": {}}, ck / "trainer_state.pt")
    with pytest.raises(ShiftkitError, match="trainer_state.pt: it holds more than tensors and plain numbers"):
        kit.resume(run, pico, opt, Dist(env={}), 4, "t", False)
    assert not marker.exists()  # nothing of the pickle ran
