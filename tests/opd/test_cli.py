"""``shiftkit opd`` on the command line: bad input is one line, exit 2, no run directory; DDP."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from shiftkit.cli import main

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": ""}
COMMON = ["tasks=add:1", "steps=2", "prompts_per_step=2", "samples_per_prompt=2", "max_new_tokens=8", "lr=1e-3",
          "eval_every=0", "threads=1", "progress=false", "guard_patience=0"]


def _opd(*args):
    return subprocess.run([sys.executable, "-m", "shiftkit", "opd", *args], env=ENV, capture_output=True, text=True,
                          timeout=300)


def _bad(capsys, trio, tmp_path, student=None, teacher=None, ref=None, extra=()):
    out = tmp_path / "run"
    capsys.readouterr()
    rc = main(["opd", "--student", student or trio["student"], "--teacher", teacher or trio["teacher"],
               "--teacher-ref", ref or trio["ref"], *COMMON, f"out={out}", *extra])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert not (out / "DONE").exists() and not (out / "config.json").exists()
    return lines[0]


def test_cli_bad_inputs_are_one_line_errors(capsys, trio, swapped_vocab_model, tmp_path):
    assert "directory not found" in _bad(capsys, trio, tmp_path, student=str(tmp_path / "nope"))
    assert "identical weights" in _bad(capsys, trio, tmp_path, ref=trio["teacher"])
    assert "vocabulary entries differ" in _bad(capsys, trio, tmp_path, teacher=swapped_vocab_model)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert "is empty" in _bad(capsys, trio, tmp_path, extra=[f"prompts={empty}", "tasks=[]"])
    assert "unknown config key 'kl_coeff'" in _bad(capsys, trio, tmp_path, extra=["kl_coeff=1"])


def test_cli_subprocess_prompt_file_and_json(trio, tmp_path):
    pf = tmp_path / "p.jsonl"
    pf.write_text('{"prompt": "1+2="}\n{"prompt": "7+5="}\n')
    p = _opd("--student", trio["student"], "--teacher", trio["teacher"], "--teacher-ref", trio["ref"], *COMMON,
             f"prompts={pf}", "tasks=[]", f"out={tmp_path / 'r'}", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    assert '"method": "direct_opd"' in p.stdout and (tmp_path / "r" / "DONE").exists()


@pytest.mark.slow
def test_two_process_ddp_equals_one_process(trio, tmp_path, free_port):
    args = ["opd", "--student", trio["student"], "--teacher", trio["teacher"], "--teacher-ref", trio["ref"], *COMMON,
            "prompts_per_step=4"]
    one = subprocess.run([sys.executable, "-m", "shiftkit", *args, f"out={tmp_path / 'one'}"], env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    acc = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--main_process_port", free_port, "-m", "shiftkit", *args, f"out={tmp_path / 'two'}"]
    two = subprocess.run(acc, env=ENV, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    w0 = load_file(str(Path(trio["student"]) / "model.safetensors"))
    w1 = load_file(str(tmp_path / "one" / "final" / "model.safetensors"))
    w2 = load_file(str(tmp_path / "two" / "final" / "model.safetensors"))
    assert max((w0[k] - w1[k]).abs().max().item() for k in w0) > 1e-4
    assert max((w1[k] - w2[k]).abs().max().item() for k in w1) < 1e-5


def test_opd_contract_user_data_and_prompt_file_only(trio, tmp_path):
    """`opd --student S --teacher T --teacher-ref R data=prompts.jsonl prompt_key=question steps=N`, and
    `prompts=FILE` (no tasks=[] needed) trains on the file's prompts only; samples.jsonl has the per-token Delta."""
    import json

    from shiftkit.cli import main as cli_main

    qs = [f"{a}+{a}=" for a in range(1, 5)]
    pf = tmp_path / "prompts.jsonl"
    pf.write_text("".join(json.dumps({"question": q}) + "\n" for q in qs))
    base = ["opd", "--student", trio["student"], "--teacher", trio["teacher"], "--teacher-ref", trio["ref"],
            *[c for c in COMMON if not c.startswith("tasks=")], "samples_every=1"]
    assert cli_main([*base, f"data={pf}", "prompt_key=question", f"out={tmp_path / 'a'}"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "a" / "samples.jsonl").read_text().splitlines()]
    assert rows and all(r["prompt"] in qs for r in rows)
    assert all(1 <= len(r["delta"]) <= 8 and r["delta/min"] <= r["delta/mean"] <= r["delta/max"] for r in rows)
    txt = tmp_path / "p.txt"
    txt.write_text("\n".join(qs) + "\n")
    assert cli_main([*base, f"prompts={txt}", f"out={tmp_path / 'b'}"]) == 0
    cfg = json.loads((tmp_path / "b" / "config.json").read_text())
    assert cfg["tasks"] == [] and cfg["prompts"] == str(txt)
    rows = [json.loads(x) for x in (tmp_path / "b" / "samples.jsonl").read_text().splitlines()]
    assert {r["prompt"] for r in rows} <= set(qs)
