"""SAR over whole checkpoints, streamed tensor by tensor: extract, apply, sweep, merge, PEFT export.

Outputs are built in a temp directory and renamed into place (``shiftkit.io.atomic_dir``): a failed
run leaves nothing behind. Non-target tensors (embeddings, lm_head, norms, biases, anything not
matched by ``targets``) follow ``other_tensors``: ``base`` (the official behaviour: RL changes to
them are dropped, and counted in the provenance) or ``tuned`` (the RL values are kept and stored
densely in the core).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import field
from pathlib import Path
from typing import Any, Literal

import torch

from shiftkit.errors import ShiftkitError
from shiftkit.io import atomic_dir, dumps
from shiftkit.sar import linalg as la
from shiftkit.sar.checkpoint import CheckpointReader, ShardedWriter, copy_meta_files
from shiftkit.sar.edit import BasisCache, EditOptions, sar_sweep_matrix, tensor_hash

DEFAULT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CORE_FORMAT = "shiftkit-sar-core/1"
CORE_WEIGHTS = "core.safetensors"
CORE_META = "sar_core.json"
FP16_MAX = 65504.0
_CORE_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
_CONFIG_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
                "num_key_value_heads", "vocab_size", "tie_word_embeddings")


# ------------------------------------------------------------------------------------------------ configs

@dataclasses.dataclass
class EditConfig:
    """Options shared by extract, sweep and merge."""

    base_rank: str = "full"  # full | fraction like 0.5 | integer | energy:0.9
    mask: Literal["full", "diagonal", "off_diagonal"] = "full"  # rewiring: full core | its diagonal in the base's singular bases | the rest
    projection: Literal["spectral", "none"] = "spectral"  # project the update onto the base's singular subspaces (none: plain low-rank)
    targets: list[str] = field(default_factory=lambda: list(DEFAULT_TARGETS))  # substrings of 2-D weight names
    exclude: list[str] = field(default_factory=list)  # substrings of weight names left out of the targets (kept as other_tensors)
    other_tensors: Literal["base", "tuned"] = "base"  # embeddings, lm_head, norms, biases
    meta_from: Literal["base", "tuned"] = "base"  # where config/tokenizer/generation config are copied from
    solver: Literal["auto", "exact", "randomized"] = "auto"  # SVD: exact | randomized | auto (exact when min(m, n) <= 256)
    niter: int = 16  # randomized SVD: power iterations (more: closer to exact)
    oversample: int = 10  # randomized SVD: extra columns of the sketch (2k + oversample)
    seed: int = 0  # the randomized SVD's sketch, and DARE's drop masks
    device: str = "auto"  # auto | cpu | cuda
    max_shard_mb: float = 2048.0  # output safetensors shard size (MB)
    max_rel_delta: float = 0.5  # ||W_tuned - W_base|| / ||W_base|| above this: "not fine-tuned from this base"
    threads: int = 0  # torch CPU threads (0: leave as is)

    def validate(self) -> None:
        try:
            self.edit_options("1")
        except ValueError as e:
            raise ShiftkitError(str(e)) from None
        if self.max_shard_mb <= 0:
            raise ShiftkitError("max_shard_mb must be > 0")

    def edit_options(self, delta_rank: str) -> EditOptions:
        return EditOptions(delta_rank=la.parse_rank(delta_rank), base_rank=la.parse_rank(self.base_rank),
                           mask=self.mask, projection=self.projection, solver=self.solver, niter=self.niter,
                           oversample=self.oversample, seed=self.seed, device=self.device)


@dataclasses.dataclass
class ExtractConfig(EditConfig):
    delta_rank: str = "0.01"  # fraction of min(m, n) (official default) | integer | energy:0.9
    scale: float = 1.0  # multiplies the edit when applied
    core_dtype: Literal["fp16", "bf16", "fp32"] = "fp16"  # dtype of the stored core factors
    edited_out: str = ""  # also write the edited checkpoint here
    peft_out: str = ""  # also write a PEFT LoRA adapter here
    diagnostics: bool = True  # write per-matrix energy diagnostics beside the core

    def validate(self) -> None:
        super().validate()
        try:
            la.parse_rank(self.delta_rank)
        except ValueError as e:
            raise ShiftkitError(str(e)) from None


@dataclasses.dataclass
class SweepConfig(EditConfig):
    delta_ranks: list[str] = field(default_factory=lambda: ["0.005", "0.01", "0.05"])  # one core per rank, each as delta_rank
    core_dtype: Literal["fp16", "bf16", "fp32"] = "fp16"  # dtype of the stored core factors
    write_models: bool = False  # also write one edited checkpoint per rank

    def validate(self) -> None:
        super().validate()
        if not self.delta_ranks:
            raise ShiftkitError("delta_ranks is empty")
        for r in self.delta_ranks:
            try:
                la.parse_rank(r)
            except ValueError as e:
                raise ShiftkitError(str(e)) from None


@dataclasses.dataclass
class ApplyConfig:
    max_shard_mb: float = 2048.0  # output safetensors shard size (MB)
    scale: float | None = None  # override the core's scale
    threads: int = 0  # torch CPU threads (0: leave as is)


@dataclasses.dataclass
class MergeConfig(EditConfig):
    method: str = "sar"  # sar | task_arithmetic | ties | dare_ties | dare_linear
    weights: list[float] = field(default_factory=list)  # one per expert (default 1.0 each)
    delta_rank: str = "0.01"  # sar only
    target: int = -1  # sar only: index of the expert kept whole ("expert B + P(dA)" mode)
    density: float = 1.0  # ties / dare
    merge_lambda: float = 1.0  # multiplies the merged update (mergekit's lambda; all methods)
    normalize: bool | None = None  # None: the method's default (ties: true, others: false)
    rescale: Literal["l1", "density", "none"] = "l1"  # dare

    def validate(self) -> None:
        super().validate()
        from shiftkit.sar.merge import method_params

        takes = method_params(self.method)  # raises on an unknown method
        _rank_ok(self.delta_rank)
        if not 0.0 < self.density <= 1.0:
            raise ShiftkitError(f"density must be in (0, 1], got {self.density}")
        defaults = MergeConfig()
        unread = [k for k, param in MERGE_FIELD_PARAMS.items()
                  if getattr(self, k) != getattr(defaults, k) and not any(p in takes for p in param.split("|"))]
        if unread:
            raise ShiftkitError(f"merge method '{self.method}' does not take {', '.join(unread)} (its parameters: "
                                f"{', '.join(_field_names(takes)) or 'none'})")


# MergeConfig field -> the merge-method parameter(s) that read it ("edit": the SAR edit options)
MERGE_FIELD_PARAMS = {"density": "density", "merge_lambda": "lambda_", "normalize": "normalize",
                      "rescale": "rescale", "target": "target", "seed": "seed|edit", "delta_rank": "edit",
                      "base_rank": "edit", "mask": "edit", "projection": "edit", "solver": "edit", "niter": "edit",
                      "oversample": "edit"}


def _field_names(takes) -> list[str]:
    return [k for k, param in MERGE_FIELD_PARAMS.items() if any(p in takes for p in param.split("|"))]


def _rank_ok(spec: str) -> bool:
    try:
        la.parse_rank(spec)
    except ValueError as e:
        raise ShiftkitError(str(e)) from None
    return True


# ------------------------------------------------------------------------------------------------ helpers

def is_target(name: str, shape: tuple[int, ...], targets: list[str], exclude: list[str]) -> bool:
    return (len(shape) == 2 and name.endswith(".weight") and any(t in name for t in targets)
            and not any(x in name for x in exclude))


def tensor_class(name: str, shape: tuple[int, ...]) -> str:
    if "embed" in name or name.endswith("wte.weight"):
        return "embedding"
    if "lm_head" in name:
        return "lm_head"
    if "norm" in name:
        return "norm"
    if name.endswith(".bias"):
        return "bias"
    return "other"


def _set_threads(n: int) -> None:
    if n and n > 0:
        torch.set_num_threads(n)


def _check_out(out: str | Path, *inputs: Path) -> Path:
    p = Path(out).expanduser()
    if not str(out):
        raise ShiftkitError("no output directory given")
    for i in inputs:
        if p.resolve() == Path(i).resolve():
            raise ShiftkitError(f"output {p} is the same directory as an input")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise ShiftkitError(f"cannot create output {p}: {parent} is a file")
    return p


def check_compatible(base: CheckpointReader, other: CheckpointReader) -> None:
    """Same architecture, same tensor names, same shapes; a vocabulary change is named as such."""
    cb, co = base.config(), other.config()
    for k in _CONFIG_KEYS:
        if k in cb and k in co and cb[k] != co[k]:
            raise ShiftkitError(f"{other.what} {other.path} has {k}={co[k]} but the base has {cb[k]}; "
                                "SAR needs a model fine-tuned from this base")
    nb, no = set(base.names), set(other.names)
    if nb != no:
        diff = sorted(nb ^ no)[0]
        where = "base" if diff in nb else other.what
        raise ShiftkitError(f"tensor {diff} exists only in the {where}; {other.what} {other.path} does not have "
                            "the base's layout (tied vs untied embeddings, or another architecture)")
    for n in base.names:
        if base.shape(n) != other.shape(n):
            if tensor_class(n, base.shape(n)) in ("embedding", "lm_head"):
                raise ShiftkitError(f"vocabulary mismatch: {n} is {list(base.shape(n))} in the base and "
                                    f"{list(other.shape(n))} in {other.what} {other.path}; SAR never truncates "
                                    "or pads a vocabulary: resize one model first")
            raise ShiftkitError(f"shape mismatch for {n}: base {list(base.shape(n))} vs {other.what} "
                                f"{list(other.shape(n))}")


def _check_related(name: str, rel: float, limit: float, who: str) -> None:
    if rel > limit:
        raise ShiftkitError(f"{who} does not look fine-tuned from this base: ||W - W_base|| / ||W_base|| = "
                            f"{rel:.3g} on {name} (limit max_rel_delta={limit:g})")


class _Fingerprint:
    def __init__(self):
        self.h = hashlib.blake2b(digest_size=16)

    def add(self, name: str, digest: str) -> None:
        self.h.update(f"{name}={digest};".encode())

    def hex(self) -> str:
        return self.h.hexdigest()


def cast_factors(B_mq: torch.Tensor, A_qn: torch.Tensor, dtype: str):
    """Cast core factors; fp16 falls back to bf16 for a matrix whose factors exceed the fp16 range.

    Returns ``(B, A, dtype_used, rel_err)`` with rel_err = ||B'A' - BA||_F / ||BA||_F.
    """
    want = _CORE_DTYPES[dtype]
    used = dtype
    if want == torch.float32:
        return B_mq.float(), A_qn.float(), used, 0.0
    biggest = max(float(B_mq.abs().max()) if B_mq.numel() else 0.0, float(A_qn.abs().max()) if A_qn.numel() else 0.0)
    if want == torch.float16 and biggest > FP16_MAX:
        want, used = torch.bfloat16, "bf16"
    Bc, Ac = B_mq.to(want), A_qn.to(want)
    full = B_mq @ A_qn
    err = la.rel_err(Bc.float() @ Ac.float(), full) if float(full.abs().max()) > 0 else 0.0
    return Bc, Ac, used, err


# ------------------------------------------------------------------------------------------------ core file

def save_core(out: Path, factors: dict[str, tuple[torch.Tensor, torch.Tensor]], dense: dict[str, torch.Tensor],
              meta: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    tensors = {}
    for name, (B, A) in factors.items():
        tensors[f"{name}.B"] = B.contiguous()
        tensors[f"{name}.A"] = A.contiguous()
    for name, t in dense.items():
        tensors[f"{name}.dense"] = t.contiguous()
    save_file(tensors, str(out / CORE_WEIGHTS), metadata={"format": CORE_FORMAT})
    (out / CORE_META).write_text(dumps(meta) + "\n")


def load_core(path: str | Path) -> tuple[dict, Any]:
    """(meta, safe_open handle factory) of a core directory."""
    p = Path(path)
    if not (p / CORE_META).is_file() or not (p / CORE_WEIGHTS).is_file():
        raise ShiftkitError(f"{p} is not a SAR core directory (needs {CORE_META} and {CORE_WEIGHTS})")
    try:
        meta = json.loads((p / CORE_META).read_text())
    except ValueError:
        raise ShiftkitError(f"{p / CORE_META} is not valid JSON") from None
    if meta.get("format") != CORE_FORMAT:
        raise ShiftkitError(f"{p / CORE_META}: unknown core format {meta.get('format')!r} (want {CORE_FORMAT})")
    return meta, p / CORE_WEIGHTS


# ------------------------------------------------------------------------------------------------ extract

def _edit_stream(base: CheckpointReader, tuned: CheckpointReader, cfg: EditConfig, ranks: list[str],
                 writers: list[ShardedWriter | None], scales: list[float], core_dtype: str, log=None):
    """Stream base and tuned once; per target matrix one truncated SVD (largest rank) and one base basis.

    Returns per-rank (factors, matrix rows), dense tensors, policy log, fingerprints, parameter total.
    """
    specs = [la.parse_rank(r) for r in ranks]
    opts = cfg.edit_options(ranks[0])
    cache = BasisCache()
    factors: list[dict] = [{} for _ in ranks]
    rows: list[dict] = [{} for _ in ranks]
    dense: dict[str, torch.Tensor] = {}
    policy: dict[str, dict[str, int]] = {}
    fp_base, fp_tuned = _Fingerprint(), _Fingerprint()
    total_params = 0
    for name in base.names:
        W0 = base.get(name)
        W1 = tuned.get(name)
        h0 = tensor_hash(W0)
        fp_base.add(name, h0)
        fp_tuned.add(name, tensor_hash(W1))
        total_params += W0.numel()
        shape = tuple(W0.shape)
        if is_target(name, shape, cfg.targets, cfg.exclude):
            t_mat = time.perf_counter()
            W0f = W0.float()  # one fp32 copy, shared by the edit, the cache and the edited weight
            edits = sar_sweep_matrix(W0f, W1, opts, specs, cache=cache, base_hash=h0)
            _check_related(name, edits[0].stats["delta_rel_norm"], cfg.max_rel_delta, f"{tuned.what} {tuned.path}")
            for i, e in enumerate(edits):
                Bc, Ac, used, cast_err = cast_factors(e.B_mq, e.A_qn, core_dtype)
                factors[i][name] = (Bc, Ac)
                rows[i][name] = {**e.stats, "dtype": used, "cast_rel_err": cast_err, "base_hash": h0}
                if writers[i] is not None:
                    writers[i].write(name, la.apply_factors(W0f, e.B_mq, e.A_qn, scales[i], out_dtype=W0.dtype))
            del W0f
            for r in rows:  # edit + cast + write of this matrix (reading and hashing excluded)
                r[name]["seconds"] = round(time.perf_counter() - t_mat, 4)
            if log:
                log(name, edits[0].stats)
        else:
            cls = tensor_class(name, shape)
            changed = not torch.equal(W0, W1)
            st = policy.setdefault(cls, {"tensors": 0, "changed_by_rl": 0, "kept_from": cfg.other_tensors})
            st["tensors"] += 1
            st["changed_by_rl"] += int(changed)
            out = W1 if cfg.other_tensors == "tuned" else W0
            if cfg.other_tensors == "tuned" and changed:
                dense[name] = W1
            for w in writers:
                if w is not None:
                    w.write(name, out)
        del W0, W1
    return factors, rows, dense, policy, fp_base.hex(), fp_tuned.hex(), total_params, cache


def _core_meta(cfg, base, tuned, delta_rank, rows, dense, policy, fpb, fpt, total, scale, t0) -> dict:
    core_params = sum(r["q"] * (r["m"] + r["n"]) for r in rows.values()) + sum(t.numel() for t in dense.values())
    options = {k: v for k, v in dataclasses.asdict(cfg).items()
               if k not in ("edited_out", "peft_out", "delta_ranks", "write_models", "threads")}
    options["delta_rank"] = delta_rank
    return {
        "format": CORE_FORMAT,
        "method": "SAR (arXiv 2607.03065)",
        "base": {"path": str(base.path.resolve()), "fingerprint": fpb},
        "tuned": {"path": str(tuned.path.resolve()), "fingerprint": fpt},
        "options": options,
        "scale": scale,
        "params": {"core": core_params, "model": total, "fraction": core_params / max(total, 1)},
        "energy": _energy_summary(rows),
        "policies": policy,
        "dense": sorted(dense),
        "matrices": rows,
        "seconds": round(time.time() - t0, 3),
    }


def _energy_summary(rows: dict) -> dict:
    if not rows:
        return {}
    keys = ("energy_lowrank", "energy_projection", "energy_total")
    return {k: sum(r.get(k, 0.0) for r in rows.values()) / len(rows) for k in keys if any(k in r for r in rows.values())}


def _writer_plan(base: CheckpointReader):
    return [(n, base.dtype(n), base.shape(n)) for n in base.names]


def extract(base_dir: str | Path, tuned_dir: str | Path, out: str | Path, cfg: ExtractConfig | None = None,
            log=None) -> dict[str, Any]:
    """Write the SAR core of (base, tuned) to ``out``; optionally the edited checkpoint and a PEFT adapter."""
    cfg = cfg or ExtractConfig()
    _set_threads(cfg.threads)
    t0 = time.time()
    base = CheckpointReader(base_dir, "base model")
    tuned = CheckpointReader(tuned_dir, "tuned model")
    check_compatible(base, tuned)
    out = _check_out(out, base.path, tuned.path)
    edited = _check_out(cfg.edited_out, base.path, tuned.path) if cfg.edited_out else None
    peft = _check_out(cfg.peft_out, base.path, tuned.path) if cfg.peft_out else None
    with atomic_dir(out) as tmp_core, _maybe_dir(edited) as tmp_edit:
        writer = ShardedWriter(tmp_edit, _writer_plan(base), int(cfg.max_shard_mb * 2**20)) if tmp_edit else None
        factors, rows, dense, policy, fpb, fpt, total, _ = _edit_stream(
            base, tuned, cfg, [cfg.delta_rank], [writer], [cfg.scale], cfg.core_dtype, log)
        if writer is not None:
            writer.close()
            copy_meta_files(base.path if cfg.meta_from == "base" else tuned.path, tmp_edit)
        meta = _core_meta(cfg, base, tuned, cfg.delta_rank, rows[0], dense, policy, fpb, fpt, total, cfg.scale, t0)
        save_core(tmp_core, factors[0], dense, meta)
        if cfg.diagnostics:
            write_diagnostics(tmp_core, rows[0])
    base.close(), tuned.close()
    summary = {"core": str(out), "edited": str(edited) if edited else None, "matrices": len(rows[0]),
               "param_fraction": meta["params"]["fraction"], "energy": meta["energy"], "seconds": meta["seconds"],
               "policies": policy}
    if peft is not None:
        summary["peft"] = str(export_peft(out, peft, base_dir))
    return summary


class _maybe_dir:
    """``atomic_dir(path)`` when a path is given, else a no-op yielding None."""

    def __init__(self, path: Path | None):
        self.cm = atomic_dir(path) if path is not None else None

    def __enter__(self):
        return self.cm.__enter__() if self.cm else None

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc) if self.cm else False


# ------------------------------------------------------------------------------------------------ sweep

def sweep(base_dir, tuned_dir, out, cfg: SweepConfig | None = None, log=None) -> dict[str, Any]:
    """One core per delta rank under ``out/rank-<spec>/`` from one decomposition per matrix, plus sweep.json."""
    cfg = cfg or SweepConfig()
    _set_threads(cfg.threads)
    t0 = time.time()
    base = CheckpointReader(base_dir, "base model")
    tuned = CheckpointReader(tuned_dir, "tuned model")
    check_compatible(base, tuned)
    out = _check_out(out, base.path, tuned.path)
    with atomic_dir(out) as tmp:
        names = [f"rank-{str(la.parse_rank(r)).replace(':', '-')}" for r in cfg.delta_ranks]
        writers = []
        for nm in names:
            (tmp / nm).mkdir()
            if cfg.write_models:
                (tmp / nm / "model").mkdir()
                writers.append(ShardedWriter(tmp / nm / "model", _writer_plan(base), int(cfg.max_shard_mb * 2**20)))
            else:
                writers.append(None)
        factors, rows, dense, policy, fpb, fpt, total, cache = _edit_stream(
            base, tuned, cfg, cfg.delta_ranks, writers, [1.0] * len(names), cfg.core_dtype, log)
        table = []
        for i, nm in enumerate(names):
            if writers[i] is not None:
                writers[i].close()
                copy_meta_files(base.path if cfg.meta_from == "base" else tuned.path, tmp / nm / "model")
            meta = _core_meta(cfg, base, tuned, cfg.delta_ranks[i], rows[i], dense, policy, fpb, fpt, total, 1.0, t0)
            save_core(tmp / nm, factors[i], dense, meta)
            write_diagnostics(tmp / nm, rows[i])
            table.append({"delta_rank": cfg.delta_ranks[i], "core": nm, "param_fraction": meta["params"]["fraction"],
                          **{f"mean_{k}": v for k, v in meta["energy"].items()}})
        (tmp / "sweep.json").write_text(dumps({"ranks": table, "seconds": round(time.time() - t0, 3),
                                                "base_cache": {"hits": cache.hits, "misses": cache.misses}}) + "\n")
    base.close(), tuned.close()
    return {"out": str(out), "ranks": table}


# ------------------------------------------------------------------------------------------------ apply

def apply(base_dir, core_dir, out, cfg: ApplyConfig | None = None) -> dict[str, Any]:
    """Rebuild the edited checkpoint from the base and a core (checks the base matches the core's)."""
    from safetensors import safe_open

    cfg = cfg or ApplyConfig()
    _set_threads(cfg.threads)
    meta, weights = load_core(core_dir)
    base = CheckpointReader(base_dir, "base model")
    out = _check_out(out, base.path, Path(core_dir))
    mats, dense = meta["matrices"], set(meta.get("dense", []))
    missing = [n for n in list(mats) + sorted(dense) if n not in base.meta]
    if missing:
        raise ShiftkitError(f"core tensor {missing[0]} is not in the base model {base.path}; wrong base?")
    for n, r in mats.items():
        if tuple(base.shape(n)) != (r["m"], r["n"]):
            raise ShiftkitError(f"core matrix {n} is {r['m']}x{r['n']} but the base has {list(base.shape(n))}")
    scale = meta.get("scale", 1.0) if cfg.scale is None else cfg.scale
    with atomic_dir(out) as tmp, safe_open(str(weights), framework="pt") as core:
        writer = ShardedWriter(tmp, _writer_plan(base), int(cfg.max_shard_mb * 2**20))
        for name in base.names:
            W0 = base.get(name)
            if name in mats:
                if tensor_hash(W0) != mats[name]["base_hash"]:
                    raise ShiftkitError(f"base tensor {name} differs from the one the core was extracted from "
                                        f"(hash mismatch); pass the core's base {meta['base']['path']}")
                W0 = la.apply_factors(W0, core.get_tensor(f"{name}.B"), core.get_tensor(f"{name}.A"), scale)
            elif name in dense:
                W0 = core.get_tensor(f"{name}.dense").to(W0.dtype)
            writer.write(name, W0)
        writer.close()
        copy_meta_files(base.path, tmp)
    base.close()
    return {"out": str(out), "matrices": len(mats), "dense": len(dense), "scale": scale}


# ------------------------------------------------------------------------------------------------ PEFT

def export_peft(core_dir, out, base_name: str | Path | None = None) -> Path:
    """Write the core as a PEFT LoRA adapter (per-module ranks via rank_pattern, alpha = r so scaling is 1)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    meta, weights = load_core(core_dir)
    if meta.get("dense"):
        raise ShiftkitError(f"core {core_dir} replaces {len(meta['dense'])} dense tensors (other_tensors=tuned); "
                            "a LoRA adapter cannot carry them: extract with other_tensors=base")
    out = _check_out(out, Path(core_dir))
    mats = meta["matrices"]
    scale = float(meta.get("scale", 1.0))
    modules = {n[: -len(".weight")]: r["q"] for n, r in mats.items()}
    if not modules:
        raise ShiftkitError(f"core {core_dir} has no matrices to export")
    r0 = max(set(modules.values()), key=list(modules.values()).count)
    tensors = {}
    with safe_open(str(weights), framework="pt") as core:
        for mod in modules:
            B = core.get_tensor(f"{mod}.weight.B").float() * scale
            A = core.get_tensor(f"{mod}.weight.A").float()
            dt = core.get_tensor(f"{mod}.weight.B").dtype
            tensors[f"base_model.model.{mod}.lora_A.weight"] = A.to(dt).contiguous()
            tensors[f"base_model.model.{mod}.lora_B.weight"] = B.to(dt).contiguous()
    pattern = {m: q for m, q in modules.items() if q != r0}
    cfg = {
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": str(base_name or meta["base"]["path"]),
        "r": r0, "lora_alpha": r0, "rank_pattern": pattern, "alpha_pattern": dict(pattern),
        "target_modules": sorted(modules), "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
        "inference_mode": True, "use_rslora": False, "use_dora": False, "init_lora_weights": True,
        "modules_to_save": None,
    }
    with atomic_dir(out) as tmp:
        save_file(tensors, str(tmp / "adapter_model.safetensors"), metadata={"format": "pt"})
        (tmp / "adapter_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return out


# ------------------------------------------------------------------------------------------------ merge

def merge(base_dir, expert_dirs: list[str | Path], out, cfg: MergeConfig | None = None, log=None) -> dict[str, Any]:
    """Merge N experts that share a base with a registered method; streamed, atomic output."""
    from shiftkit.sar.merge import merge_tensor, params_for

    cfg = cfg or MergeConfig()
    _set_threads(cfg.threads)
    cfg.validate()  # fail fast on an unknown method or a parameter it does not take, before any I/O
    if len(expert_dirs) < 1:
        raise ShiftkitError("merge needs at least one expert")
    weights = cfg.weights or [1.0] * len(expert_dirs)
    if len(weights) != len(expert_dirs):
        raise ShiftkitError(f"weights has {len(weights)} values for {len(expert_dirs)} experts")
    if cfg.target >= len(expert_dirs):
        raise ShiftkitError(f"target={cfg.target} but there are {len(expert_dirs)} experts (0-based)")
    base = CheckpointReader(base_dir, "base model")
    experts = [CheckpointReader(d, f"expert {i}") for i, d in enumerate(expert_dirs)]
    for e in experts:
        check_compatible(base, e)
    out = _check_out(out, base.path, *[e.path for e in experts])
    edit = cfg.edit_options(cfg.delta_rank)
    cache = BasisCache()
    params = {"density": cfg.density, "lambda_": cfg.merge_lambda, "rescale": cfg.rescale, "seed": cfg.seed,
              "edit": edit, "cache": cache, "target": cfg.target}
    if cfg.normalize is not None:
        params["normalize"] = cfg.normalize
    t0 = time.time()
    counts = {"merged": 0, "kept_base": 0}
    with atomic_dir(out) as tmp:
        writer = ShardedWriter(tmp, _writer_plan(base), int(cfg.max_shard_mb * 2**20))
        for name in base.names:
            W0 = base.get(name)
            Ws = [e.get(name) for e in experts]  # as stored (e.g. bf16); fp32 only per matrix or chunk
            target = is_target(name, tuple(W0.shape), cfg.targets, cfg.exclude)
            if target:
                W0n = max(float(torch.linalg.vector_norm(W0.float())), 1e-30)
                for e, W in zip(experts, Ws):
                    rel = float(torch.linalg.vector_norm(W.float() - W0.float())) / W0n
                    _check_related(name, rel, cfg.max_rel_delta, f"{e.what} {e.path}")
            if cfg.method == "sar" and not target and cfg.other_tensors == "base":
                merged = W0
                counts["kept_base"] += 1
            else:
                # sar on non-targets (other_tensors=tuned): plain weighted sum
                method = "task_arithmetic" if cfg.method == "sar" and not target else cfg.method
                merged = merge_tensor(method, W0, Ws, weights, **params_for(method, params))
                counts["merged"] += 1
            del Ws
            writer.write(name, merged)
            if log:
                log(name, {})
        writer.close()
        copy_meta_files(base.path, tmp)
        (tmp / "sar_merge.json").write_text(dumps({
            "method": cfg.method, "experts": [str(e.path.resolve()) for e in experts], "weights": weights,
            "options": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "threads"},
            "tensors": counts, "seconds": round(time.time() - t0, 3)}) + "\n")
    return {"out": str(out), "method": cfg.method, "experts": len(experts), **counts,
            "seconds": round(time.time() - t0, 3)}


# ------------------------------------------------------------------------------------------------ diagnostics

def write_diagnostics(out: Path, rows: dict[str, dict]) -> None:
    """diagnostics.json (per matrix) and diagnostics.png (energies and principal angles by matrix)."""
    from shiftkit.plots import energy_angle_plot

    names = list(rows)
    (out / "diagnostics.json").write_text(dumps({"matrices": [{"name": n, **rows[n]} for n in names]}) + "\n")
    energy_angle_plot(out / "diagnostics.png", rows)
