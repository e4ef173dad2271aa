"""Batched sampling with a KV cache, and a padding-invariant scorer.

Layout used everywhere: prompts are **left**-padded to ``P`` tokens, completions are
**right**-padded to ``T`` tokens; a sequence is ``[pad.. prompt | completion ..pad]`` with an
attention mask that is 0 on padding and position ids ``cumsum(mask) - 1``, so padding never
changes a real token's position or what it attends to. That is why scoring a sequence alone or
inside a padded batch gives the same log-probs (tested to 1e-5 in fp32).

Sampling randomness is drawn per row from a generator seeded by ``row_seeds[b]`` (inverse-CDF
sampling), so a row's sample does not depend on which other rows share its batch: the same rollout
comes out on 1 process or split across 2 (DDP), and after a resume.

Decoding (one token per row per step after the prompt) has two implementations, chosen by
``sample(decode=...)``: :class:`FusedDecoder` for transformers' Llama and Qwen3 (a preallocated
KV cache, one plain function over the layers' weights, MKL-packed fp32 weights on CPU), and the
model's own forward on a ``DynamicCache`` for any other model. ``decode=auto`` picks the fused one
where it applies and says (log and ``Rollouts.info``) when it does not. Both give the same tokens and
log-probs up to float rounding (tested on the tiny models and SmolLM2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time

import torch

from shiftkit.errors import ShiftkitError
from shiftkit.models import autocast
from shiftkit.prompts import left_pad, right_pad

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Rollouts:
    """A batch of sampled completions (B rows)."""

    prompt_ids_BP: torch.Tensor  # left-padded
    prompt_mask_BP: torch.Tensor
    completion_ids_BT: torch.Tensor  # right-padded with pad_id
    completion_mask_BT: torch.Tensor  # 1 on generated tokens (the EOS included), 0 after
    logp_BT: torch.Tensor  # log-prob of each sampled token under the sampling distribution
    eos_B: torch.Tensor  # bool: the row stopped at EOS (not truncated)
    texts: list[str]
    info: dict = dataclasses.field(default_factory=dict)  # how it was decoded (see sample)


def concat_rollouts(parts: list[Rollouts], pad_id: int) -> Rollouts:
    """Rows of several :class:`Rollouts` as one batch: prompts re-left-padded, completions re-right-padded
    to the widest part (the same layout a single :func:`sample` call gives)."""
    P = max(r.prompt_ids_BP.shape[1] for r in parts)
    T = max(r.completion_ids_BT.shape[1] for r in parts)

    def left(x, w, v):
        return torch.nn.functional.pad(x, (w - x.shape[1], 0), value=v)

    def right(x, w, v):
        return torch.nn.functional.pad(x, (0, w - x.shape[1]), value=v)

    return Rollouts(torch.cat([left(r.prompt_ids_BP, P, pad_id) for r in parts]),
                    torch.cat([left(r.prompt_mask_BP, P, 0) for r in parts]),
                    torch.cat([right(r.completion_ids_BT, T, pad_id) for r in parts]),
                    torch.cat([right(r.completion_mask_BT, T, 0) for r in parts]),
                    torch.cat([right(r.logp_BT, T, 0.0) for r in parts]),
                    torch.cat([r.eos_B for r in parts]), [t for r in parts for t in r.texts], _merge_info(parts))


def _merge_info(parts: list[Rollouts]) -> dict:
    """The parts' ``info``: numbers summed, other values kept when all parts agree, else joined."""
    out: dict = {}
    for k in dict.fromkeys(k for r in parts for k in r.info):
        vals = [r.info[k] for r in parts if k in r.info]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            out[k] = sum(vals)
        else:
            out[k] = vals[0] if all(v == vals[0] for v in vals) else "+".join(dict.fromkeys(map(str, vals)))
    return out


def encode_prompts(tokenizer, prompts: list[str], device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompt ids and mask (no special tokens are added)."""
    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    return pad_left(ids, tokenizer.pad_token_id, device)


def pad_left(ids: list[list[int]], pad: int, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Token-id rows left-padded to the longest, and their mask (:func:`shiftkit.prompts.left_pad`)."""
    return left_pad(ids, pad, device)


def encode_completions(tokenizer, completions: list[str], add_eos: bool = True, device="cpu"):
    """Right-padded completion ids and mask (EOS appended by default; :func:`shiftkit.prompts.right_pad`)."""
    eos = tokenizer.eos_token_id
    ids = [tokenizer(c, add_special_tokens=False)["input_ids"] + ([eos] if add_eos else []) for c in completions]
    return right_pad(ids, tokenizer.pad_token_id, device)


def _positions(mask_BL: torch.Tensor) -> torch.Tensor:
    return (mask_BL.cumsum(-1) - 1).clamp(min=0)


def process_logits(logits_BV: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Log-probs of the sampling distribution: temperature scaling, then nucleus (top-p) truncation."""
    logits_BV = logits_BV.float() / max(temperature, 1e-8)
    if top_p < 1.0:
        sorted_BV, idx_BV = logits_BV.sort(-1, descending=True)
        probs_BV = sorted_BV.softmax(-1)
        drop_BV = probs_BV.cumsum(-1) - probs_BV > top_p  # keep the smallest prefix with mass >= top_p
        sorted_BV = sorted_BV.masked_fill(drop_BV, float("-inf"))
        logits_BV = torch.full_like(logits_BV, float("-inf")).scatter(-1, idx_BV, sorted_BV)
    return logits_BV.log_softmax(-1)


def inverse_cdf(logp_BV: torch.Tensor, u_B: torch.Tensor) -> torch.Tensor:
    """Token ids ``[B]`` drawn by inverse-CDF from log-probs ``[B, V]`` with uniforms ``u_B`` in [0, 1).

    Token ``i`` is picked when ``u * total`` lies in ``[cdf_{i-1}, cdf_i)``; a zero-probability token
    has an empty interval, so it is never picked (``u = 0`` gives the first token with mass; a draw
    that rounds up to the total gives the last token with mass).
    """
    cdf_BV = logp_BV.exp().cumsum(-1)
    total_B1 = cdf_BV[:, -1:].contiguous()
    tok_B = torch.searchsorted(cdf_BV, u_B.unsqueeze(-1) * total_B1, right=True).squeeze(-1)
    return torch.minimum(tok_B, torch.searchsorted(cdf_BV, total_B1).squeeze(-1))


# --------------------------------------------------------------------------------------------------
# Decoders: what turns "the next token of each row" into "the logits after it"
# --------------------------------------------------------------------------------------------------

DECODERS = ("auto", "fused", "generic")
FUSED_ARCHS = ("LlamaForCausalLM", "Qwen3ForCausalLM")
_said: set[str] = set()


def _say_once(msg: str) -> None:
    if msg not in _said:
        _said.add(msg)
        log.warning("%s", msg)


def fused_unsupported(model) -> str | None:
    """Why :class:`FusedDecoder` cannot decode ``model`` (None when it can).

    It runs transformers' own Llama and Qwen3 causal LMs (exact classes, plain ``nn.Linear``
    projections, SiLU MLP, full attention, no module hooks): anything else (another family, a PEFT
    adapter injected into the layers, an offloading hook, a sliding window) needs the generic path.
    """
    import transformers

    name = type(model).__name__
    if name not in FUSED_ARCHS or type(model) is not getattr(transformers, name, None):
        return f"{type(model).__module__}.{name} has no fused decode (it exists for transformers' {', '.join(FUSED_ARCHS)})"
    cfg = model.config
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"{name}: hidden_act={cfg.hidden_act!r} (the fused decode implements silu)"
    if getattr(cfg, "use_sliding_window", False) or any(t != "full_attention" for t in getattr(cfg, "layer_types", None) or []):
        return f"{name}: sliding-window layers (the fused decode implements full attention)"
    inner = model.model
    if type(inner.embed_tokens) is not torch.nn.Embedding:
        return f"{name}: embed_tokens is a {type(inner.embed_tokens).__name__}, not nn.Embedding"
    for mname, m in model.named_modules():
        if _foreign_hooks(m) or hasattr(m, "_hf_hook"):
            return f"{name}: module '{mname or 'model'}' has forward hooks (the fused decode would skip them)"
        if mname.endswith(("_proj", "lm_head")) and type(m) is not torch.nn.Linear:
            return f"{name}: '{mname}' is a {type(m).__name__}, not nn.Linear (e.g. an adapter or quantized layer)"
    for p in model.parameters():
        if p.device.type == "meta" or not p.dtype.is_floating_point:
            return f"{name}: a parameter is {p.dtype} on {p.device} (the fused decode needs dense float weights)"
    return None


def _foreign_hooks(m: torch.nn.Module) -> list:
    """Forward (pre-)hooks on ``m`` other than transformers' output-capturing ones, which record only while a
    forward asks for hidden states/attentions (installed for good on the first such call)."""
    hooks = list(m._forward_hooks.values()) + list(m._forward_pre_hooks.values())
    return [h for h in hooks if getattr(h, "__module__", "") != "transformers.utils.output_capturing"]


def _mkl_packing_available() -> bool:
    try:
        return bool(torch._C.has_mkl) and callable(torch.ops.mkl._mkl_linear)
    except (AttributeError, RuntimeError):
        return False


PACK_MAX_BYTES = 2 * 2**30  # MKL's packed copy is about twice the weights: packing stops at 2 GiB of weights
PACK_MIN_ROWS = 4  # below this, MKL's unpacked small-batch kernels already read the weight at memory speed


class _Lin:
    """One projection. Unpacked: ``F.linear``. Packed (:meth:`pack`): MKL's copy of the weight laid out for
    batches of exactly ``M`` rows (``torch.ops.mkl._mkl_linear``, what inductor's freezing uses for fp32 CPU
    linears), so a few-row matmul reads the weight once at memory speed instead of repacking it on every
    call; another batch size takes ``F.linear``."""

    __slots__ = ("w", "b", "packed", "M")

    def __init__(self, mod: torch.nn.Linear):
        self.w, self.b, self.packed, self.M = mod.weight, mod.bias, None, 0

    def pack(self, M: int) -> None:
        self.packed = None  # free the old copy first
        self.packed, self.M = (torch.ops.mkl._mkl_reorder_linear_weight(self.w, M), M) if M else (None, 0)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None and x.shape[0] == self.M:
            return torch.ops.mkl._mkl_linear(x, self.packed, self.w, self.b, self.M)
        return torch.nn.functional.linear(x, self.w, self.b)


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Llama/Qwen3 RMSNorm (fp32: the fused ``F.rms_norm``, the same values)."""
    if x.dtype == torch.float32 and w.dtype == torch.float32:
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps)
    dt = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(dt)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * sin


class FusedDecoder:
    """The per-token step of a Llama/Qwen3 model on a preallocated KV cache.

    The prompt goes through the model's own forward (its cache is then copied into buffers sized for
    every position the sampler can reach); each later token goes through one plain function over the
    layers' weights, the same ops as transformers' modules (RMSNorm in fp32, the model's rotary
    embedding module, grouped-query SDPA, SiLU MLP) without the per-call work of a module forward
    (mask building, cache concatenation, output objects). Rows that finish stay in the batch (their
    outputs are ignored) until at most half are alive; then the batch and the cache are compacted. So
    the matmul shapes stay fixed between compactions, and with ``pack`` every weight is packed by MKL
    for the current batch size (repacked at each compaction; below :data:`PACK_MIN_ROWS` rows the
    packs are dropped).
    """

    compact_any = False  # compact only when at most half the rows are alive

    def __init__(self, model, cache, mask_BP: torch.Tensor, max_new_tokens: int, pack: bool):
        inner, cfg = model.model, model.config
        B, P = mask_BP.shape
        S = P + max_new_tokens
        self.rotary, self.emb = inner.rotary_emb, inner.embed_tokens.weight
        self.eps = inner.norm.variance_epsilon
        self.norm = inner.norm.weight
        self.head = _Lin(model.lm_head)
        attn0 = inner.layers[0].self_attn
        self.D, self.scaling = attn0.head_dim, attn0.scaling
        self.H, self.Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
        self.layers = []
        for i, layer in enumerate(inner.layers[: cfg.num_hidden_layers]):
            a, m = layer.self_attn, layer.mlp
            k0, v0 = cache.layers[i].keys, cache.layers[i].values
            k_BHSD = k0.new_zeros(B, self.Hkv, S, self.D)
            v_BHSD = v0.new_zeros(B, self.Hkv, S, self.D)
            k_BHSD[:, :, :P], v_BHSD[:, :, :P] = k0, v0
            self.layers.append(dict(
                ln1=layer.input_layernorm.weight, ln2=layer.post_attention_layernorm.weight,
                q=_Lin(a.q_proj), k=_Lin(a.k_proj), v=_Lin(a.v_proj), o=_Lin(a.o_proj), gate=_Lin(m.gate_proj),
                up=_Lin(m.up_proj), down=_Lin(m.down_proj), qn=a.q_norm.weight if hasattr(a, "q_norm") else None,
                kn=a.k_norm.weight if hasattr(a, "k_norm") else None, kc=k_BHSD, vc=v_BHSD))
        self.mask_BS = torch.zeros(B, S, dtype=torch.bool, device=mask_BP.device)
        self.mask_BS[:, :P] = mask_BP.bool()
        self.s = P  # the cache slot the next token writes
        self.pack, self.pack_s = pack, 0.0
        self._pack(B)

    def _pack(self, M: int) -> None:
        """MKL-packed weights for batches of ``M`` rows (none below :data:`PACK_MIN_ROWS` or without ``pack``)."""
        if not self.pack:
            return
        t0 = time.perf_counter()
        M = M if M >= PACK_MIN_ROWS else 0
        for L in self.layers:
            for n in ("q", "k", "v", "o", "gate", "up", "down"):
                L[n].pack(M)
        self.head.pack(M)
        self.pack_s += time.perf_counter() - t0

    def select(self, idx_A: torch.Tensor) -> None:
        for L in self.layers:
            L["kc"], L["vc"] = L["kc"][idx_A], L["vc"][idx_A]
        self.mask_BS = self.mask_BS[idx_A]
        self._pack(len(idx_A))

    def step(self, tok_A: torch.Tensor, pos_A: torch.Tensor) -> torch.Tensor:
        A, H, Hkv, D, s, eps = tok_A.shape[0], self.H, self.Hkv, self.D, self.s, self.eps
        silu, sdpa = torch.nn.functional.silu, torch.nn.functional.scaled_dot_product_attention
        h = torch.nn.functional.embedding(tok_A, self.emb)  # [A, E]
        cos, sin = self.rotary(h, pos_A[:, None])  # [A, 1, D]
        self.mask_BS[:, s] = True
        mask = self.mask_BS[:, None, None, : s + 1]
        for L in self.layers:
            x = _rms(h, L["ln1"], eps)
            q, k, v = L["q"](x).view(A, H, D), L["k"](x).view(A, Hkv, D), L["v"](x).view(A, Hkv, D)
            if L["qn"] is not None:
                q, k = _rms(q, L["qn"], eps), _rms(k, L["kn"], eps)
            L["kc"][:, :, s] = _rope(k, cos, sin)
            L["vc"][:, :, s] = v
            o = sdpa(_rope(q, cos, sin)[:, :, None], L["kc"][:, :, : s + 1], L["vc"][:, :, : s + 1], attn_mask=mask,
                     scale=self.scaling, enable_gqa=H != Hkv)
            h = h + L["o"](o.reshape(A, H * D))
            x = _rms(h, L["ln2"], eps)
            h = h + L["down"](silu(L["gate"](x)) * L["up"](x))
        self.s = s + 1
        return self.head(_rms(h, self.norm, eps))


class _GenericDecoder:
    """The model's own forward per token on transformers' ``DynamicCache`` (any causal LM)."""

    compact_any = True  # finished rows leave the batch and the cache at once

    def __init__(self, model, cache, mask_BP: torch.Tensor):
        self.model, self.cache, self.mask_AL = model, cache, mask_BP

    def select(self, idx_A: torch.Tensor) -> None:
        for layer in self.cache.layers:
            layer.batch_select_indices(idx_A)
        self.mask_AL = self.mask_AL[idx_A]

    def step(self, tok_A: torch.Tensor, pos_A: torch.Tensor) -> torch.Tensor:
        m = self.mask_AL
        self.mask_AL = torch.cat([m, torch.ones(len(tok_A), 1, dtype=m.dtype, device=m.device)], 1)
        out = self.model(input_ids=tok_A[:, None], attention_mask=self.mask_AL, position_ids=pos_A[:, None],
                         cache=self.cache, use_cache=True)
        self.cache = out.cache
        return out.logits[:, -1]


def choose_decoder(model, decode: str = "auto") -> tuple[str, str, bool]:
    """``(decoder, why, pack)`` for ``sample(decode=...)``: ``fused`` where :func:`fused_unsupported` finds
    nothing against it, else ``generic`` with the reason (``decode=fused`` on such a model is an error);
    ``pack``: MKL-packed weights (fp32 weights on CPU with MKL, at most :data:`PACK_MAX_BYTES`). Under autocast
    the generic decoder runs (the model's own casts)."""
    if decode not in DECODERS:
        raise ShiftkitError(f"decode={decode!r}: use one of {', '.join(DECODERS)}")
    if decode == "generic":
        return "generic", "", False
    why = fused_unsupported(model)
    p = next(model.parameters())
    if why is None and torch.is_autocast_enabled(p.device.type):
        why = f"autocast is on for {p.device.type} (the fused step does not mirror the model's mixed-precision casts)"
    if why is not None:
        if decode == "fused":
            raise ShiftkitError(f"decode=fused: {why}; use decode=auto (falls back to the generic decoder) or generic")
        return "generic", why, False
    nbytes = sum(q.numel() * q.element_size() for q in model.parameters())
    pack = (p.device.type == "cpu" and p.dtype == torch.float32 and nbytes <= PACK_MAX_BYTES
            and _mkl_packing_available())
    return "fused", "", pack


@torch.no_grad()
def sample(
    model,
    tokenizer,
    prompts: list[str] | None = None,
    *,
    prompt_ids: list[list[int]] | None = None,
    max_new_tokens: int = 64,
    temperature: float = 1.0,
    top_p: float = 1.0,
    greedy: bool = False,
    row_seeds: list[int] | None = None,
    seed: int = 0,
    decode: str = "auto",
) -> Rollouts:
    """Sample one completion per prompt with a KV cache, stopping rows at EOS.

    The prompts are strings (``prompts``) or token-id rows (``prompt_ids``, e.g. a multi-turn context
    that already holds tool output). ``row_seeds[b]`` seeds row b's random stream (default ``seed + b``). Log-probs are of the
    sampling distribution (temperature/top-p applied); with ``greedy`` they are of the
    temperature-1 distribution.

    ``decode``: ``auto`` (the fused decoder for transformers' Llama and Qwen3, the generic one for any other
    model, logged once and named in ``info["why"]``), ``fused`` (an error on a model it cannot run) or
    ``generic`` (the model's own forward per token). Both give the same tokens and log-probs up to float
    rounding. ``Rollouts.info`` records the decoder, the matmul path, the number of decode steps and the
    prefill/decode seconds.
    """
    device = next(model.parameters()).device
    if (prompts is None) == (prompt_ids is None):
        raise ValueError("sample: give either prompts or prompt_ids")
    kind, why, pack = choose_decoder(model, decode)
    if why:
        _say_once(f"sampling: {why}; decoding with the generic per-token forward")
    was_training = model.training
    model.eval()
    if prompt_ids is not None:
        ids_BP, mask_BP = pad_left(prompt_ids, tokenizer.pad_token_id, device)
    else:
        ids_BP, mask_BP = encode_prompts(tokenizer, prompts, device)
    B = ids_BP.shape[0]
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    u_BT = None
    if not greedy:  # row b's t-th uniform comes from its own stream, whatever else is in the batch
        seeds = row_seeds if row_seeds is not None else [seed + b for b in range(B)]
        u_BT = torch.stack([torch.rand(max_new_tokens, generator=torch.Generator().manual_seed(int(s)))
                            for s in seeds]).to(device)

    from transformers import DynamicCache

    t0 = time.perf_counter()
    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids_BP, attention_mask=mask_BP, position_ids=_positions(mask_BP), cache=cache,
                use_cache=True, logits_to_keep=1)
    logits_AV = out.logits[:, -1]
    dec = (FusedDecoder(model, out.cache, mask_BP, max_new_tokens, pack) if kind == "fused"
           else _GenericDecoder(model, out.cache, mask_BP))
    t1 = time.perf_counter()
    pos_A = _positions(mask_BP)[:, -1]
    rows_A = torch.arange(B, device=device)  # A = rows in the decoder's batch
    alive_A = torch.ones(B, dtype=torch.bool, device=device)  # those still generating
    comp_BT = torch.full((B, max_new_tokens), pad, dtype=torch.long, device=device)
    cmask_BT = torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
    logp_BT = torch.zeros((B, max_new_tokens), dtype=torch.float32, device=device)
    T = steps = compactions = 0
    for t in range(max_new_tokens):
        if greedy:
            logp_AV = logits_AV.float().log_softmax(-1)
            tok_A = logp_AV.argmax(-1)
        else:
            logp_AV = process_logits(logits_AV, temperature, top_p)
            tok_A = inverse_cdf(logp_AV, u_BT[rows_A, t])
        live = rows_A[alive_A]
        comp_BT[live, t] = tok_A[alive_A]
        cmask_BT[live, t] = 1
        logp_BT[live, t] = logp_AV.gather(-1, tok_A[:, None]).squeeze(-1)[alive_A]
        T = t + 1
        alive_A = alive_A & (tok_A != eos)
        n_alive = int(alive_A.sum())
        if n_alive == 0 or t == max_new_tokens - 1:
            break
        if n_alive < len(rows_A) and (dec.compact_any or 2 * n_alive <= len(rows_A)):
            idx = alive_A.nonzero().squeeze(-1)  # finished rows leave the batch and the KV cache
            dec.select(idx)
            compactions += 1
            rows_A, tok_A, pos_A, alive_A = rows_A[idx], tok_A[idx], pos_A[idx], alive_A[idx]
        pos_A = pos_A + 1
        logits_AV = dec.step(torch.where(alive_A, tok_A, pad), pos_A)
        steps += 1
    t2 = time.perf_counter()
    comp_BT, cmask_BT, logp_BT = comp_BT[:, :T], cmask_BT[:, :T], logp_BT[:, :T]
    eos_B = ((comp_BT == eos) & cmask_BT.bool()).any(-1)
    texts = [tokenizer.decode(comp_BT[b][cmask_BT[b].bool()].tolist(), skip_special_tokens=True) for b in range(B)]
    model.train(was_training)
    info = {"decoder": kind, "matmul": "mkl_packed" if pack else "linear", "steps": steps,
            "compactions": compactions, "prefill_s": t1 - t0, "decode_s": t2 - t1, "pack_s": getattr(dec, "pack_s", 0.0)}
    if why:
        info["why"] = why
    return Rollouts(ids_BP, mask_BP, comp_BT, cmask_BT, logp_BT, eos_B, texts, info)


def forward_completion(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT,
                       dtype: str | torch.dtype | None = None, **model_kw):
    """The one teacher-forced forward over (left-padded prompt, right-padded completion) with
    ``position_ids = cumsum(mask) - 1``, under autocast when ``dtype`` is not fp32, through the model's
    own ``__call__`` (so a DDP/FSDP wrapper syncs). Returns the model output; position ``P-1+t``
    predicts completion token ``t``."""
    ids_BL = torch.cat([prompt_ids_BP, completion_ids_BT], 1)
    mask_BL = torch.cat([prompt_mask_BP, completion_mask_BT], 1)
    with autocast(ids_BL.device.type, dtype):
        return model(input_ids=ids_BL, attention_mask=mask_BL, position_ids=_positions(mask_BL), use_cache=False,
                     **model_kw)


def forward_logits(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT,
                   dtype: str | torch.dtype | None = None) -> torch.Tensor:
    """Logits ``[B, T, V]`` predicting each completion token (grad flows if enabled)."""
    P = prompt_ids_BP.shape[1]
    out = forward_completion(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, dtype)
    return out.logits[:, P - 1 : -1].float()


def token_logprobs(logits_BTV: torch.Tensor, ids_BT: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(ids) under ``softmax(logits / temperature)``, shape ``[B, T]``."""
    logp_BTV = (logits_BTV / temperature).log_softmax(-1)
    return logp_BTV.gather(-1, ids_BT.unsqueeze(-1)).squeeze(-1)


def score(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT,
          dtype: str | torch.dtype = "float32", temperature: float = 1.0, batch_size: int | None = None,
          grad: bool = False) -> torch.Tensor:
    """Per-token log-probs ``[B, T]`` of given completions under ``model`` (0 at padding)."""
    B = prompt_ids_BP.shape[0]
    bs = batch_size or B
    ctx = contextlib.nullcontext() if grad else torch.no_grad()
    outs = []
    with ctx:
        for s in range(0, B, bs):
            sl = slice(s, s + bs)
            logits_BTV = forward_logits(model, prompt_ids_BP[sl], prompt_mask_BP[sl], completion_ids_BT[sl],
                                        completion_mask_BT[sl], dtype)
            lp_BT = token_logprobs(logits_BTV, completion_ids_BT[sl], temperature)
            outs.append(lp_BT * completion_mask_BT[sl])
    return torch.cat(outs, 0)


def score_texts(model, tokenizer, prompts: list[str], completions: list[str], dtype="float32",
                add_eos: bool = True, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Convenience: per-token log-probs and masks for (prompt, completion) strings."""
    device = next(model.parameters()).device
    p_ids, p_mask = encode_prompts(tokenizer, prompts, device)
    c_ids, c_mask = encode_completions(tokenizer, completions, add_eos, device)
    return score(model, p_ids, p_mask, c_ids, c_mask, dtype=dtype, batch_size=batch_size), c_mask
