"""Peak memory of a GRPO step on SmolLM2-135M-Instruct (real 49k vocabulary), side by side.

Two sections, each measurement a fresh child process (peak = the child's VmHWM, so nothing of one
run leaks into the next):

``peer``: the whole GRPO step as a new user runs it, shiftkit's ``run_grpo`` against TRL's
``GRPOTrainer`` at matched settings: 2 prompts x 4 samples, 64 new tokens, fp32, AdamW lr 1e-6,
token-mean loss, PPO clip 0.2 (one epoch: ratio 1), no KL (TRL's beta 0), the same word problems
through the chat template and the same reward (hash parity of the completion: every step has signal, so
both sides take every optimizer step; SmolLM2 at 64 tokens almost never earns the math reward, and a
batch without signal is skipped by shiftkit but not by TRL), 3 steps, torch threads matched. Activation
checkpointing is set the same on both sides, once off and once on (TRL's default is on). shiftkit
before this work (``--baseline-src``, a checkout of 6336a33) runs the same command (it has no
checkpointing key). The final model save is skipped on every side (it is not the step).

``scale``: one GRPO update (scoring + loss + backward + AdamW) of 8 prompts x 4 samples at 64,
128 and 512 new tokens, and 32 prompts x 4 at 512. The rollouts are sampled once (EOS ignored, so
every completion has exactly that many tokens: the worst case, identical for both sides) and
injected into the real loop (``run_grpo`` with ``kit.rollout`` replaced), so what is measured is
the loop's own scoring and update code. Step 0 is a 1-row warm-up that allocates the gradients and
Adam's state; the peak is reset (``/proc/self/clear_refs``) before step 1, and *activation memory* =
peak during step 1 - resident memory at its start (weights, gradients, Adam state). "before" is
6336a33's loop (full ``[B, T, V]`` logits, no micro-batches); "after" is this loop with
``token_budget=2048 grad_checkpointing=true``. A child that passes ``--cap-gb`` resident is stopped
and reported as not fitting (the machine has 24 GB, shared).

    git worktree add /tmp/base6336 6336a33
    shiftkit model import-gguf smollm2 --out /tmp/smollm2
    PYTHONPATH=. python benchmarks/bench_memory.py --model /tmp/smollm2 --baseline-src /tmp/base6336 \\
        --threads 2 --out benchmarks/results/scale.json

Results: ``benchmarks/results/scale.json`` (sections ``peer_comparison`` and ``scale``, with "matched"; ``peer``,
``ratio`` (peak memory, TRL / shiftkit), ``command`` and ``commit`` at the top).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _status(key: str, pid: str = "self") -> int:
    """A /proc/<pid>/status field in MB."""
    m = re.search(rf"{key}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(m.group(1)) // 1024 if m else 0


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def parity_reward(prompts, completions, **kw) -> list[float]:
    """A reward with signal on any text (the scale section's forced-length completions): hash parity."""
    import hashlib

    from shiftkit.rewards import completion_text

    return [float(hashlib.sha256(completion_text(c).encode()).digest()[0] % 2) for c in completions]


def _problems(n: int, split: str = "train") -> list[dict]:
    from shiftkit.tasks.wordproblems import generate

    return [{"question": r["question"], "answer": r["answer"]} for r in generate(n, split, seed=0)]


# ------------------------------------------------------------------------------ children

def child_shiftkit(spec: dict) -> dict:
    """run_grpo on word problems (this tree or --baseline-src), final save skipped; peak and step times."""
    import torch

    from shiftkit import runs
    from shiftkit.rl import GRPOConfig, run_grpo

    torch.manual_seed(0)
    peak = {}

    def no_save(self, model, tok, summary):  # the final save is not the step
        peak["hwm"] = _status("VmHWM")

    runs.RunDir.finish = no_save
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "train.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in _problems(64)))
        kw = dict(model=spec["model"], out=str(Path(tmp) / "run"), data=str(data), prompt_key="question",
                  answer_key="answer", reward=["bench_memory:parity_reward"], steps=spec["steps"], prompts_per_step=spec["prompts"],
                  group_size=spec["group"], max_new_tokens=spec["max_new_tokens"], lr=1e-6, clip_low=0.2,
                  eval_every=0, save_every=0, samples_every=0, threads=spec["threads"], progress=False)
        kw.update(spec.get("extra", {}))
        run_grpo(GRPOConfig(**kw))
        rows = [json.loads(l) for l in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    return {"peak_rss_mb": peak["hwm"], "step_seconds": [r["step_time"] for r in rows],
            "response_len": [r["response_len"] for r in rows]}


def child_trl(spec: dict) -> dict:
    """TRL's GRPOTrainer at the same settings; peak and per-step wall times."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(spec["model"])
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": r["question"]}], "answer": r["answer"]}
                            for r in _problems(64)])
    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t = time.time()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.time() - self.t)

    with tempfile.TemporaryDirectory() as tmp:
        args = GRPOConfig(output_dir=tmp, per_device_train_batch_size=spec["prompts"] * spec["group"],
                          num_generations=spec["group"], max_completion_length=spec["max_new_tokens"],
                          learning_rate=1e-6, use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                          logging_steps=1, max_steps=spec["steps"], seed=0, beta=0.0, epsilon=0.2,
                          loss_type="dapo", temperature=1.0, top_p=1.0,
                          gradient_checkpointing=spec.get("extra", {}).get("grad_checkpointing", False))
        tr = GRPOTrainer(model=model, reward_funcs=[parity_reward], args=args, train_dataset=ds, processing_class=tok,
                         callbacks=[Clock()])
        tr.train()
        lens = [h.get("completions/mean_length") for h in tr.state.log_history if "completions/mean_length" in h]
    return {"peak_rss_mb": _status("VmHWM"), "step_seconds": times, "response_len": lens}


def child_rollouts(spec: dict) -> dict:
    """Sample the scale section's rollouts once, EOS ignored (every completion max_new_tokens long); save them."""
    import torch

    from shiftkit import loopkit as kit
    from shiftkit.dist import Dist
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.prompts import PromptRenderer

    torch.set_num_threads(spec["threads"])
    model, tok = load_model_and_tokenizer(spec["model"])
    ids = [PromptRenderer(tok).ids(r["question"]) for r in _problems(spec["prompts"])]
    class NoEos:  # the tokenizer with an EOS id no token has: every row runs to max_new_tokens
        eos_token_id = -1

        def __getattr__(self, name):
            return getattr(tok, name)

    _, roll = kit.rollout(model, NoEos(), ids, spec["group"], 0, 1, Dist(), max_new_tokens=spec["max_new_tokens"],
                          temperature=1.0, rows=8)
    torch.save(roll.__dict__, spec["path"])
    return {"rows": int(roll.completion_ids_BT.shape[0]), "completion_tokens": int(roll.completion_mask_BT.sum()),
            "prompt_cols": int(roll.prompt_ids_BP.shape[1])}


def child_update(spec: dict) -> dict:
    """The loop's scoring + update on injected rollouts (this tree or --baseline-src); activation peak of step 1."""
    import torch

    from shiftkit import loopkit as kit
    from shiftkit import runs
    from shiftkit.rl import GRPOConfig, run_grpo
    from shiftkit.sampling import Rollouts

    roll = Rollouts(**torch.load(spec["path"], weights_only=False))
    G = spec["group"]
    # the warm-up: one group, 4 tokens, texts whose parity rewards differ (signal: the step allocates grads and Adam state)
    texts = [f"w{i}" for i in range(64)]
    par = parity_reward(None, texts)
    texts = ([t for t, p in zip(texts, par) if p == 1][:1] + [t for t, p in zip(texts, par) if p == 0])[:G]
    tiny = Rollouts(roll.prompt_ids_BP[:G], roll.prompt_mask_BP[:G], roll.completion_ids_BT[:G, :4],
                    roll.completion_mask_BT[:G, :4], roll.logp_BT[:G, :4], roll.eos_B[:G], texts)
    rec: dict = {}

    def injected(model, tok, prompts_P, G, seed, step, d, **kw):
        if step == 0:
            return [0], tiny
        rec["static_mb"] = _status("VmRSS")
        _reset_peak()
        return list(range(len(prompts_P))), roll

    def no_save(self, model, tok, summary):
        rec["peak_rss_mb"] = _status("VmHWM")

    kit.rollout = injected
    runs.RunDir.finish = no_save
    P = roll.completion_ids_BT.shape[0] // G
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "train.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in _problems(max(P, 2))))
        kw = dict(model=spec["model"], out=str(Path(tmp) / "run"), data=str(data), prompt_key="question",
                  answer_key="answer", reward=["bench_memory:parity_reward"], steps=2, prompts_per_step=P,
                  group_size=spec["group"], max_new_tokens=spec["max_new_tokens"], lr=1e-6, eval_every=0,
                  save_every=0, samples_every=0, threads=spec["threads"], progress=False)
        kw.update(spec.get("extra", {}))
        t0 = time.time()
        run_grpo(GRPOConfig(**kw))
        rows = [json.loads(l) for l in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    rec["activation_mb"] = rec["peak_rss_mb"] - rec["static_mb"]
    rec["update_seconds"] = rows[1]["time/update"] + rows[1].get("time/score", 0.0)
    rec["micro_batches"] = rows[1].get("micro_batches", 1)
    rec["wall_seconds"] = time.time() - t0
    return rec


CHILDREN = {"shiftkit": child_shiftkit, "trl": child_trl, "rollouts": child_rollouts, "update": child_update}


# ------------------------------------------------------------------------------ parent

def run_child(kind: str, spec: dict, src: Path, cap_gb: float, threads: int) -> dict:
    """One measurement in a fresh process; stopped (and reported as not fitting) above ``cap_gb`` resident."""
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{HERE}", "OMP_NUM_THREADS": str(threads),
           "TOKENIZERS_PARALLELISM": "false", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    with tempfile.NamedTemporaryFile("r", suffix=".json") as res:
        p = subprocess.Popen([sys.executable, __file__, "--child", kind, "--spec", json.dumps(spec),
                              "--result", res.name], env=env, cwd=str(src), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        over = {"mb": 0}

        def watch():
            while p.poll() is None:
                try:
                    rss = _status("VmRSS", str(p.pid))
                except (FileNotFoundError, ProcessLookupError):
                    return
                over["mb"] = max(over["mb"], rss)
                if rss > cap_gb * 1024:
                    over["killed"] = True
                    p.kill()
                    return
                time.sleep(0.1)

        w = threading.Thread(target=watch, daemon=True)
        w.start()
        t0 = time.time()
        err = p.communicate()[1]
        w.join()
        if over.get("killed"):
            return {"fits": False, "stopped_at_rss_mb": over["mb"], "cap_gb": cap_gb, "wall_seconds": time.time() - t0}
        if p.returncode != 0:
            raise SystemExit(f"child {kind} {spec} failed:\n{err[-3000:]}")
        out = json.loads(Path(res.name).read_text())
    out["fits"] = True
    return out


def _med(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def section_peer(a) -> dict:
    base = dict(model=a.model, prompts=2, group=4, max_new_tokens=64, steps=3, threads=a.threads)
    rows = []
    for ckpt in (False, True):
        extra = {"grad_checkpointing": ckpt}
        for who, kind, src in (("shiftkit", "shiftkit", ROOT), ("trl", "trl", ROOT),
                               ("shiftkit_before", "shiftkit", Path(a.baseline_src) if a.baseline_src else None)):
            if src is None or (who == "shiftkit_before" and ckpt):
                continue  # the old loop has no checkpointing key
            print(f"peer: {who} grad_checkpointing={ckpt}", file=sys.stderr, flush=True)
            r = run_child(kind, {**base, "extra": extra if who != "shiftkit_before" else {}}, src, a.cap_gb, a.threads)
            r.update(side=who, grad_checkpointing=ckpt, median_step_seconds=_med(r.get("step_seconds", [])[1:]))
            rows.append(r)
            print(f"  peak {r.get('peak_rss_mb')} MB, step {r['median_step_seconds']}", file=sys.stderr, flush=True)
    ratios = {}
    for ckpt in (False, True):
        s = next(r for r in rows if r["side"] == "shiftkit" and r["grad_checkpointing"] == ckpt)
        t = next(r for r in rows if r["side"] == "trl" and r["grad_checkpointing"] == ckpt)
        ratios[f"grad_checkpointing={ckpt}"] = {
            "peak_shiftkit_over_trl": s["peak_rss_mb"] / t["peak_rss_mb"],
            "step_time_shiftkit_over_trl": s["median_step_seconds"] / t["median_step_seconds"]}
    return {"setting": "SmolLM2-135M-Instruct, 2 prompts x 4 samples, 64 new tokens, 3 steps (median of steps 2-3)",
            "matched": {"dtype": "float32", "batch": "2 prompts x 4 samples", "max_new_tokens": 64, "lr": 1e-6,
                        "optimizer": "AdamW", "loss": "token mean (TRL dapo), clip 0.2, 1 epoch", "kl": "none (beta 0)",
                        "data": "word problems through the chat template", "reward": "hash parity (bench_memory.parity_reward, TRL signature) on both sides",
                        "grad_checkpointing": "same on both sides, off and on", "threads": a.threads,
                        "final_save": "skipped on both sides"},
            "rows": rows, "ratios": ratios}


def section_scale(a) -> dict:
    rows = []
    after = {"token_budget": 2048, "grad_checkpointing": True}
    cases = [(8, 64), (8, 128), (8, 512), (32, 512)]
    with tempfile.TemporaryDirectory() as tmp:
        for P, T in cases:
            path = str(Path(tmp) / f"roll_{P}_{T}.pt")
            print(f"scale: sampling {P}x4 rows, {T} tokens", file=sys.stderr, flush=True)
            info = run_child("rollouts", dict(model=a.model, prompts=P, group=4, max_new_tokens=T, path=path,
                                              threads=a.threads), ROOT, a.cap_gb, a.threads)
            spec = dict(model=a.model, group=4, max_new_tokens=T, path=path, threads=a.threads)
            sides = [("after", ROOT, after)]
            if a.baseline_src:
                sides.append(("before", Path(a.baseline_src), {}))
            for who, src, extra in sides:
                print(f"scale: {who} P={P} T={T}", file=sys.stderr, flush=True)
                r = run_child("update", {**spec, "extra": extra}, src, a.cap_gb, a.threads)
                r.update(side=who, prompts=P, samples=4, new_tokens=T, rollout=info, settings=extra)
                rows.append(r)
                print(f"  {json.dumps({k: r.get(k) for k in ('fits', 'peak_rss_mb', 'activation_mb', 'stopped_at_rss_mb')})}",
                      file=sys.stderr, flush=True)
    summary = {}
    for P, T in cases:
        b = next((r for r in rows if r["side"] == "before" and (r["prompts"], r["new_tokens"]) == (P, T)), None)
        f = next(r for r in rows if r["side"] == "after" and (r["prompts"], r["new_tokens"]) == (P, T))
        key = f"{P}x4_{T}"
        summary[key] = {"after_activation_mb": f.get("activation_mb"), "after_peak_mb": f.get("peak_rss_mb")}
        if b is not None:
            summary[key].update(before_activation_mb=b.get("activation_mb"), before_peak_mb=b.get("peak_rss_mb"),
                                before_fits=b["fits"], before_stopped_at_rss_mb=b.get("stopped_at_rss_mb"))
            if b["fits"] and f.get("activation_mb"):
                summary[key]["activation_ratio_before_over_after"] = b["activation_mb"] / f["activation_mb"]
    a8, a32 = summary["8x4_512"]["after_activation_mb"], summary["32x4_512"]["after_activation_mb"]
    return {"setting": "one GRPO update on injected fixed-length rollouts (EOS ignored), SmolLM2-135M-Instruct",
            "matched": {"dtype": "float32", "rollouts": "the same tensors for before and after", "threads": a.threads,
                        "loss": "token mean, no clip, no KL", "optimizer": "AdamW (state allocated by a warm-up step)"},
            "after_settings": after, "cap_gb": a.cap_gb, "rows": rows, "summary": summary,
            "after_activation_32_over_8_prompts": (a32 / a8) if a8 and a32 else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child")
    ap.add_argument("--spec")
    ap.add_argument("--result")
    ap.add_argument("--model")
    ap.add_argument("--baseline-src", default="", help="a checkout of the commit before this work (6336a33)")
    ap.add_argument("--sections", default="peer,scale")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cap-gb", type=float, default=14.0, help="stop a child above this resident size")
    ap.add_argument("--out", default=str(HERE / "results" / "scale.json"))
    a = ap.parse_args()
    if a.child:
        spec = json.loads(a.spec)
        import torch

        torch.set_num_threads(spec.get("threads", 1))
        Path(a.result).write_text(json.dumps(CHILDREN[a.child](spec)))
        return
    if not a.model:
        raise SystemExit("bench_memory: --model <SmolLM2 dir> is required (shiftkit model import-gguf smollm2 --out DIR)")
    out_path = Path(a.out)
    res = json.loads(out_path.read_text()) if out_path.exists() else {}
    import platform

    sys.path.insert(0, str(HERE.parent))
    from benchmarks.common import provenance, spread
    from shiftkit.io import atomic_write_json

    res["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(), "loadavg_start": os.getloadavg()}
    res.update({k: v for k, v in provenance().items() if k in ("command", "commit")})
    res.pop("commit_note", None)
    for s in a.sections.split(","):
        key = "peer_comparison" if s == "peer" else s
        res[key] = {"peer": section_peer, "scale": section_scale}[s](a)
        res["machine"]["loadavg_end"] = os.getloadavg()
        res["load_avg"] = [res["machine"]["loadavg_start"], res["machine"]["loadavg_end"]]
        if s == "peer":  # the peer, the memory ratio (TRL peak / shiftkit peak) and the step-time spread
            import trl

            pc = res[key]
            rows = {(r["side"], r["grad_checkpointing"]): r for r in pc["rows"]}
            res["peer"] = {"name": "trl.GRPOTrainer", "version": trl.__version__}
            res.pop("peer_note", None)
            res["matched"] = pc["matched"]
            if ("trl", False) in rows and ("shiftkit", False) in rows:
                res["ratio"] = rows[("trl", False)]["peak_rss_mb"] / rows[("shiftkit", False)]["peak_rss_mb"]
                res["ratio_note"] = ("peak memory (VmHWM) of one GRPO step without activation checkpointing: TRL / "
                                     "shiftkit (> 1: shiftkit uses less); step times here are not a speed comparison")
            res["step_seconds"] = {f"{sd}_gc={g}": spread(r["step_seconds"]) for (sd, g), r in rows.items()}
        atomic_write_json(out_path, res)
    print(json.dumps({s: res["peer_comparison" if s == "peer" else s].get("ratios")
                      or res["peer_comparison" if s == "peer" else s].get("summary") for s in a.sections.split(",")},
                     indent=1))


if __name__ == "__main__":
    main()
