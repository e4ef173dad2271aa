"""Run directories, checkpoints and resume, shared by every training loop.

A run directory holds::

    config.json          resolved config (what actually ran)
    metrics.jsonl        one flat dict per step (and eval rows with "eval/" keys)
    checkpoints/step_N/  HF save_pretrained dir (the full weights, gathered under FSDP) + trainer_state.pt
                         (step, the optimizer's full state keyed by parameter name, extra), written atomically;
                         resume reads trainer_state.pt with ``weights_only=True`` (tensors and numbers only)
    final/               the final HF model (atomically written) ; DONE marks a finished run
    summary.json         the run's summary
    rollout_weights/     served rollouts only: the weights the server loads; removed when the run finishes

Steps are counted 1-based everywhere a run writes or prints one: ``step N`` is the state after N
optimizer updates (``metrics.jsonl``'s ``step``, ``checkpoints/step_N``, "resuming after step N", the
progress lines), and ``step 0`` is the evaluation before the first update -- as TRL's ``global_step``
and verl's ``global_steps``.

``keep_checkpoints`` (a key of every training command, default :data:`KEEP_CHECKPOINTS`): the last N
checkpoints are kept, while the run goes and after it finishes; 0 keeps none once the run finishes
(while it runs, the latest stays so a killed run resumes); -1 keeps every one.

All randomness in our loops is derived from ``(seed, step)``, so a checkpoint needs only weights,
optimizer state and the step to resume bit-for-bit.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import torch

from shiftkit.dist import full_state_dict, load_full_state_dict, load_optimizer_state, optimizer_state, unwrap
from shiftkit.errors import ShiftkitError
from shiftkit.io import JsonlWriter, atomic_dir, atomic_write_json, ensure_writable_dir, truncate_jsonl
from shiftkit.models import quiet_hf, save_model


KEEP_CHECKPOINTS = 2  # the default of the training commands' keep_checkpoints key
ROLLOUT_WEIGHTS = "rollout_weights"  # the served-rollout weight copy, removed by RunDir.finish


class RunDir:
    def __init__(self, path: str | Path, config: dict[str, Any], overwrite: bool = False,
                 ignore_keys: tuple[str, ...] = ("steps", "eval_every", "save_every", "threads", "progress",
                                                 "keep_checkpoints")):
        self.path = Path(path)
        cfg_path = self.path / "config.json"
        refuse_foreign_dir(self.path, overwrite, marker="config.json")
        if overwrite and self.path.exists():
            shutil.rmtree(self.path)
        ensure_writable_dir(self.path)
        if cfg_path.exists():
            old = json.loads(cfg_path.read_text())
            diff = sorted(k for k in set(old) | set(config)
                          if k not in ignore_keys and old.get(k) != config.get(k))
            if diff:
                raise ShiftkitError(
                    f"run directory {self.path} holds a run with a different config (keys: {', '.join(diff)}); "
                    "use another out directory or overwrite=true"
                )
            if self.done and "steps" in config and old.get("steps") != config.get("steps"):
                raise ShiftkitError(
                    f"run {self.path} is already finished ({old.get('steps')} steps); it is not extended to "
                    f"{config.get('steps')} steps: train from {self.path / 'final'} into a new out directory, "
                    "or pass overwrite=true to start over")
        atomic_write_json(cfg_path, config)
        self.config = config

    @classmethod
    def attach(cls, path: str | Path, config: dict[str, Any]) -> "RunDir":
        """The run directory another rank has already checked and written (no checks, no writes)."""
        run = cls.__new__(cls)
        run.path, run.config = Path(path), config
        return run

    @property
    def done(self) -> bool:
        return (self.path / "DONE").exists() and (self.path / "final" / "config.json").exists()

    @property
    def final(self) -> Path:
        return self.path / "final"

    @property
    def keep_checkpoints(self) -> int:
        """The run's ``keep_checkpoints`` (see the module docstring)."""
        return int(self.config.get("keep_checkpoints", KEEP_CHECKPOINTS))

    def metrics_writer(self, done_steps: int) -> JsonlWriter:
        """Open metrics.jsonl for appending, after dropping the rows of steps after ``done_steps`` (resume)."""
        truncate_jsonl(self.path / "metrics.jsonl", lambda r: r.get("step", -1) <= done_steps)
        return JsonlWriter(self.path / "metrics.jsonl")

    # ---- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self, step: int, model, tokenizer, optimizer, extra: dict | None = None,
                        d=None) -> Path | None:
        """Every rank calls it (under FSDP the full state dicts are gathered); the main rank writes the
        HF directory and ``trainer_state.pt`` (tensors and plain numbers only: resume loads it with
        ``weights_only=True``)."""
        state = full_state_dict(model) if d is not None and d.strategy == "fsdp" else None
        opt_state = optimizer_state(model, optimizer)
        if d is not None and not d.is_main:
            return None
        ckdir = self.path / "checkpoints" / f"step_{step:06d}"
        with atomic_dir(ckdir) as tmp:
            with quiet_hf():
                unwrap(model).save_pretrained(tmp, safe_serialization=True, **({"state_dict": state} if state else {}))
                if tokenizer is not None:
                    tokenizer.save_pretrained(tmp)
            torch.save({"step": step, "optimizer": opt_state, "extra": extra or {}}, tmp / "trainer_state.pt")
        self.prune_checkpoints(max(1, self.keep_checkpoints) if self.keep_checkpoints >= 0 else -1)
        return ckdir

    def prune_checkpoints(self, keep: int) -> None:
        """Remove all but the last ``keep`` checkpoints (-1: keep all; 0: remove checkpoints/)."""
        if keep == 0:
            shutil.rmtree(self.path / "checkpoints", ignore_errors=True)
        elif keep > 0:
            for old in sorted((self.path / "checkpoints").glob("step_*"))[:-keep]:
                shutil.rmtree(old, ignore_errors=True)

    def latest_checkpoint(self) -> Path | None:
        cks = sorted(p for p in (self.path / "checkpoints").glob("step_*")
                     if (p / "trainer_state.pt").exists()
                     and ((p / "config.json").exists() or (p / "adapter_config.json").exists()))
        return cks[-1] if cks else None

    def load_trainer_state(self, ckdir: Path, model, optimizer) -> tuple[int, dict]:
        """Load a checkpoint into ``model`` (sharded or not) and ``optimizer``; returns ``(step, extra)``."""
        from safetensors.torch import load_file

        state = {}
        for f in sorted(ckdir.glob("*.safetensors")):
            state.update(load_file(f))
        if is_peft(model):  # a LoRA run checkpoints its adapter (PEFT's save_pretrained)
            from peft import set_peft_model_state_dict

            res = set_peft_model_state_dict(unwrap(model), state)
            if getattr(res, "unexpected_keys", None):
                raise ShiftkitError(f"checkpoint {ckdir} does not match the LoRA policy "
                                    f"(unexpected {list(res.unexpected_keys)[:3]})")
        else:
            missing, unexpected = load_full_state_dict(model, state)
            missing = [k for k in missing if not k.endswith("lm_head.weight")]  # tied weights are not saved twice
            if missing or unexpected:
                raise ShiftkitError(f"checkpoint {ckdir} does not match the model (missing {missing[:3]}, "
                                    f"unexpected {unexpected[:3]})")
        ts = read_trainer_state(ckdir / "trainer_state.pt")
        load_optimizer_state(model, optimizer, ts["optimizer"])
        return int(ts["step"]), ts.get("extra", {})

    def finish(self, model, tokenizer, summary: dict[str, Any], state: dict | None = None) -> None:
        """The final model (``state``: its full state dict, gathered from an FSDP-sharded ``model``), DONE
        and the summary. Main rank only."""
        if is_peft(model):  # a LoRA run: the adapter in adapter/, the merged model in final/ (what other commands load)
            with atomic_dir(self.path / "adapter") as tmp, quiet_hf():
                model.save_pretrained(tmp, safe_serialization=True)
            model = model.merge_and_unload()
        save_model(unwrap(model), tokenizer, self.final, state_dict=state)
        atomic_write_json(self.path / "summary.json", summary)
        (self.path / "DONE").write_text("ok\n")
        self.prune_checkpoints(self.keep_checkpoints)
        shutil.rmtree(self.path / ROLLOUT_WEIGHTS, ignore_errors=True)

    def summary(self) -> dict[str, Any]:
        return read_summary(self.path)


def is_peft(model) -> bool:
    """A PEFT (LoRA) model, DDP-wrapped or not."""
    m = model.module if hasattr(model, "module") else model
    return hasattr(m, "peft_config") and hasattr(m, "disable_adapter")


def read_trainer_state(path: Path) -> dict:
    """``trainer_state.pt`` with ``weights_only=True``: tensors, numbers, strings and containers of them. A
    file holding any other object (a pickle that would run code) is refused, nothing of it is executed."""
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - UnpicklingError, or a foreign/corrupt file
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ShiftkitError(f"refusing {path}: it holds more than tensors and plain numbers, or is corrupt ({msg[:200]}); "
                            "shiftkit writes only tensors and numbers there, so this checkpoint was not written by "
                            "it: delete the checkpoint directory or pass overwrite=true") from None


def open_run_dir(path: str | Path, config: dict[str, Any], overwrite: bool, d) -> RunDir:
    """The run directory for every rank of ``d`` (a :class:`shiftkit.dist.Dist`): the main rank checks,
    clears and writes it, the others attach once it has. Without this a second rank could see the
    directory half-written (a temp file, no config.json yet) and refuse it as foreign, or race an
    ``overwrite`` rmtree."""
    run = RunDir(path, config, overwrite=overwrite) if d.is_main else None
    d.barrier()
    return run if run is not None else RunDir.attach(path, config)


def refuse_foreign_dir(path: str | Path, overwrite: bool, marker: str = "config.json") -> None:
    """An existing non-empty directory that is not one of ours (no ``marker`` file) is refused unless
    ``overwrite``: ``--out`` must never silently replace a user's directory."""
    p = Path(path)
    if overwrite or not p.exists():
        return
    if p.is_file():
        raise ShiftkitError(f"out {p} is a file; pass a directory")
    if any(p.iterdir()) and not (p / marker).exists():
        raise ShiftkitError(f"out directory {p} exists and is not a shiftkit output (no {marker}); "
                            "pass another out, or overwrite=true to replace it")


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    """A run directory's summary.json ({} if the run has not finished)."""
    p = Path(run_dir) / "summary.json"
    return json.loads(p.read_text()) if p.exists() else {}


# ---- trackers: the run's metrics through accelerate (report_to) ----

def _tracker_names(report_to: str) -> list[str]:
    return [n.strip() for n in (report_to or "").split(",") if n.strip() and n.strip() != "none"]


def check_report_to(report_to: str) -> None:
    """Fail at config time (before anything is written) when a requested tracker cannot be made."""
    for n in _tracker_names(report_to):
        if n not in ("tensorboard", "wandb"):
            raise ShiftkitError(f"report_to={n}: use tensorboard, wandb or none")
        if importlib.util.find_spec("accelerate") is None:
            raise ShiftkitError(f"report_to={report_to} needs accelerate: pip install accelerate")
        mods = ("tensorboard", "tensorboardX") if n == "tensorboard" else ("wandb",)
        if not any(importlib.util.find_spec(m) is not None for m in mods):
            raise ShiftkitError(f"report_to={n} needs the {n} package: pip install {n}")


def make_trackers(report_to: str, run: RunDir, config: dict) -> list:
    """accelerate's trackers for ``report_to=tensorboard|wandb`` (comma-separated; "" or none = off)."""
    check_report_to(report_to)
    out = []
    for n in _tracker_names(report_to):
        from accelerate import tracking  # an optional dependency (checked above)

        t = (tracking.TensorBoardTracker(run.path.name, str(run.path / "tensorboard")) if n == "tensorboard"
             else tracking.WandBTracker(run.path.name))
        if hasattr(t, "start"):  # accelerate >= 1.x opens the writer / run in start() (Accelerator.init_trackers does)
            t.start()
        t.store_init_configuration({k: v for k, v in config.items() if isinstance(v, (int, float, str, bool))})
        out.append(t)
    return out
