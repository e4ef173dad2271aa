"""FSDP2 on CPU/gloo: 2 processes under `accelerate launch`, parameters sharded with torch's
fully_shard and each rank's share split into token-budget micro-batches (accumulated, unequal counts
per rank padded with zero-scale fillers) and log-probs from the chunked head (shiftkit.logprobs),
give the same weights after 2 SFT steps as 1 process with whole batches and full logits (1e-5). See the script's
docstring for why accelerate's own FSDP config cannot be used on CPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scale" / "fsdp_sft_script.py"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "",
       "TOKENIZERS_PARALLELISM": "false"}


@pytest.mark.slow
def test_two_process_fsdp_equals_one_process(tmp_path, free_port):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    p1 = subprocess.Popen([sys.executable, str(SCRIPT), "--out", str(one)], env=ENV, stderr=subprocess.PIPE, text=True)
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
              str(ROOT / "configs" / "accelerate" / "cpu_gloo.yaml"), "--main_process_port", free_port, str(SCRIPT),
              "--out", str(two), "--token-budget", "20", "--chunked-head"]
    r2 = subprocess.run(launch, env=ENV, capture_output=True, text=True, timeout=300)
    assert p1.wait(timeout=300) == 0, p1.stderr.read()[-3000:]
    assert r2.returncode == 0, r2.stderr[-3000:]
    a, b = torch.load(one), torch.load(two)
    assert a["world"] == 1 and b["world"] == 2
    assert b["all_sharded"] and b["local_numel"] < 0.6 * a["local_numel"]  # really sharded, about half per rank
    # rank 0: step 0 needs 1 micro-batch but rank 1 needs 2 (one zero-scale filler); step 1 needs 2
    assert a["micro_batches"] == [(1, 0), (1, 0)] and b["micro_batches"] == [(2, 1), (2, 0)]
    from shiftkit.models import TinyModelSpec, make_tiny_model

    spec = TinyModelSpec(hidden_size=32, num_hidden_layers=2, intermediate_size=64, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8)
    init = make_tiny_model(spec, vocab_size=100, seed=0).state_dict()
    assert a["state"].keys() == b["state"].keys()
    assert max(float((a["state"][k] - init[k]).abs().max()) for k in init) > 1e-4  # the steps moved the weights
    assert max(float((a["state"][k] - b["state"][k]).abs().max()) for k in a["state"]) < 1e-5
