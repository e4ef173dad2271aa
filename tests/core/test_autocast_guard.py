"""The one autocast context (shiftkit.models.autocast): fp32/None is no autocast; a low-precision type on a CPU
without native oneDNN matmuls for it is honoured but announced once per process and type (ATen's scalar bf16
gemm measured 40x slower than fp32 on an AVX2-only EPYC), never silently."""
import torch

from shiftkit import models


def test_fp32_and_none_are_no_autocast():
    for d in (None, "float32", torch.float32):
        with models.autocast("cpu", d):
            assert not torch.is_autocast_enabled("cpu")


def test_native_lowp_matmul_follows_onednn():
    assert models.native_lowp_matmul("cuda", torch.bfloat16)
    assert models.native_lowp_matmul("cpu", torch.float32)
    assert models.native_lowp_matmul("cpu", torch.bfloat16) == bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def test_slow_autocast_is_announced_once(monkeypatch, capsys):
    monkeypatch.setattr(models, "native_lowp_matmul", lambda dev, dt: False)
    monkeypatch.setattr(models, "_SLOW_AUTOCAST_WARNED", set())
    for _ in range(3):
        with models.autocast("cpu", "bfloat16"):
            assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    err = capsys.readouterr().err
    assert err.count("autocast=bfloat16 on this CPU") == 1 and "autocast=none" in err


def test_native_autocast_is_quiet(monkeypatch, capsys):
    monkeypatch.setattr(models, "native_lowp_matmul", lambda dev, dt: True)
    monkeypatch.setattr(models, "_SLOW_AUTOCAST_WARNED", set())
    with models.autocast("cpu", "bfloat16"):
        pass
    assert "autocast=" not in capsys.readouterr().err
