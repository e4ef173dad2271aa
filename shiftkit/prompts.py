"""Prompt rendering: one function, used identically by rollouts, scoring, preflight and evaluation.

A prompt (a string or a list of chat messages, see :mod:`shiftkit.data`) becomes token ids in two
steps:

1. ``template`` wraps the user text: ``{prompt}`` (the default, the text itself), ``dapo`` (the
   DAPO instruction the Direct-OPD paper puts around each math problem, :data:`DAPO_TEMPLATE`), or
   any string holding ``{prompt}``. For chat messages it wraps the last user message.
2. With a chat template (``chat_template=auto`` uses the tokenizer's when it has one; ``true``
   requires it), the messages (a string prompt is one user message, so an instruct model sees
   its own format; TRL leaves string prompts untemplated, which is ``chat_template=false``) go through
   ``tokenizer.apply_chat_template(..., add_generation_prompt=True, **chat_template_kwargs)``,
   e.g. ``chat_template_kwargs={"enable_thinking": false}``. Without one, the text is tokenized
   as is, with no special tokens added (what the toy models are trained on).

:meth:`PromptRenderer.ids` is what the sampler, the scorers and the OPD preflight should all be
given, so they see the same ids; :meth:`PromptRenderer.text` decodes to the same ids
(``tokenizer(text, add_special_tokens=False)`` gives them back) for code that takes strings.

SFT rows render the same way: the prompt as above, the completion as the tokens the chat template
adds for the assistant turn, cut after its end-of-turn token (which is the tokenizer's EOS for
chat models), or the completion text plus EOS without a chat template.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from shiftkit.errors import ShiftkitError

DAPO_TEMPLATE = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n{prompt}\n\n"
    'Remember to put your answer on its own line after "Answer:".'
)
TEMPLATES = {"plain": "{prompt}", "dapo": DAPO_TEMPLATE}


@dataclasses.dataclass
class PromptKeys:
    """The prompt-rendering keys of every command, declared once and mixed into each command's config."""

    chat_template: str = "auto"  # auto (the tokenizer's if it has one) | true (required) | false (raw text)
    template: str = "{prompt}"  # wraps the user text: a string with {prompt}, or a name: plain | dapo
    chat_template_kwargs: dict = dataclasses.field(default_factory=dict)  # passed to apply_chat_template, e.g. {"enable_thinking": false}


@dataclasses.dataclass(frozen=True)
class SFTIds:
    prompt_ids: list[int]
    completion_ids: list[int]  # ends with EOS unless truncated
    truncated: bool = False


def resolve_template(template: str) -> str:
    t = TEMPLATES.get(template, template) if template else "{prompt}"
    if "{prompt}" not in t:
        raise ShiftkitError(f"template {template!r} has no {{prompt}} placeholder (or use a name: "
                            f"{', '.join(TEMPLATES)})")
    return t


def _flag(value: Any, key: str) -> str:
    v = str(value).strip().lower()
    if v in ("auto",):
        return "auto"
    if v in ("true", "1", "yes", "on"):
        return "true"
    if v in ("false", "0", "no", "off", "none", ""):
        return "false"
    raise ShiftkitError(f"{key}={value!r}: use auto, true or false")


def _ids(out: Any) -> list[int]:
    """apply_chat_template(tokenize=True) returns a list or (transformers 5) a BatchEncoding."""
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    if out and isinstance(out[0], list):
        out = out[0]
    return [int(i) for i in out]


class PromptRenderer:
    """Renders prompts (and SFT completions) to token ids for one tokenizer."""

    def __init__(self, tokenizer, chat_template: str | bool = "auto", template: str = "{prompt}",
                 chat_template_kwargs: dict | None = None, where: str = ""):
        self.tok = tokenizer
        self.template = resolve_template(template)
        self.template_name = template if template in TEMPLATES else ("custom" if template != "{prompt}" else "plain")
        self.kwargs = dict(chat_template_kwargs or {})
        mode = _flag(chat_template, "chat_template")
        has = bool(getattr(tokenizer, "chat_template", None))
        if mode == "true" and not has:
            loc = f" at '{where}'" if where else ""
            raise ShiftkitError(f"chat_template=true but the tokenizer{loc} has no chat template; "
                                "pass chat_template=false to render prompts as plain text")
        self.chat = has if mode == "auto" else mode == "true"
        if self.kwargs and not self.chat:
            raise ShiftkitError("chat_template_kwargs given but prompts are rendered without a chat template")

    @classmethod
    def from_keys(cls, tokenizer, keys: PromptKeys, where: str = "") -> "PromptRenderer":
        """The renderer of a config that has the :class:`PromptKeys` (any command's)."""
        return cls(tokenizer, keys.chat_template, keys.template, keys.chat_template_kwargs, where)

    def describe(self) -> str:
        how = "chat template" + (f" {self.kwargs}" if self.kwargs else "") if self.chat else "plain text"
        return f"{how}, template {self.template_name}"

    # ---- prompts ----------------------------------------------------------------------------------
    def _wrap(self, text: str) -> str:
        return self.template.replace("{prompt}", text)

    def messages(self, prompt: str | list[dict]) -> list[dict]:
        """The chat messages of a prompt, the template applied to the last user message."""
        if isinstance(prompt, str):
            return [{"role": "user", "content": self._wrap(prompt)}]
        msgs = [dict(m) for m in prompt]
        users = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
        if self.template != "{prompt}":
            if not users:
                raise ShiftkitError("the prompt template needs a user message to wrap; the prompt has none")
            msgs[users[-1]]["content"] = self._wrap(str(msgs[users[-1]]["content"]))
        return msgs

    def _apply(self, msgs: list[dict], tokenize: bool, generation: bool):
        try:
            out = self.tok.apply_chat_template(msgs, tokenize=tokenize, add_generation_prompt=generation,
                                               **self.kwargs)
        except Exception as e:  # noqa: BLE001 - template errors come from user templates/data
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ShiftkitError(f"the chat template failed on a prompt: {msg}") from None
        return _ids(out) if tokenize else out

    def text(self, prompt: str | list[dict]) -> str:
        """The rendered prompt as text (ends with the assistant header when chatting)."""
        if self.chat:
            return self._apply(self.messages(prompt), tokenize=False, generation=True)
        if not isinstance(prompt, str):
            raise ShiftkitError("the prompt is a list of chat messages (or system_prompt was given) but prompts are "
                                "rendered without a chat template; use a tokenizer with one, or plain-text prompts")
        return self._wrap(prompt)

    def ids(self, prompt: str | list[dict]) -> list[int]:
        """The token ids the model sees for a prompt."""
        if self.chat:
            return self._apply(self.messages(prompt), tokenize=True, generation=True)
        return list(self.tok(self.text(prompt), add_special_tokens=False)["input_ids"])

    def batch_ids(self, prompts: list) -> list[list[int]]:
        return [self.ids(p) for p in prompts]

    # ---- SFT ----------------------------------------------------------------------------------
    def _completion_ids(self, prompt: str | list[dict], completion: str | list[dict], where: str) -> tuple[list, list]:
        eos = self.tok.eos_token_id
        if not self.chat:
            if not isinstance(completion, str):
                raise ShiftkitError(f"{where}: chat-message completions need a chat template")
            c = list(self.tok(completion, add_special_tokens=False)["input_ids"])
            return self.ids(prompt), c + ([eos] if eos is not None else [])
        p_msgs = self.messages(prompt)
        c_msgs = [{"role": "assistant", "content": completion}] if isinstance(completion, str) else list(completion)
        p_ids = self._apply(p_msgs, tokenize=True, generation=True)
        full = self._apply(p_msgs + c_msgs, tokenize=True, generation=False)
        if full[: len(p_ids)] != p_ids:
            raise ShiftkitError(f"{where}: the chat template renders the conversation with a different prefix than "
                                "the prompt alone, so the completion tokens cannot be separated")
        c = full[len(p_ids):]
        if eos is not None and eos in c:  # keep up to the end-of-turn token; the sampler stops there too
            c = c[: len(c) - c[::-1].index(eos)]
        elif eos is not None:
            c = c + [eos]
        return p_ids, c

    def encode_sft(self, row, max_length: int = 0) -> SFTIds | None:
        """Token ids of an :class:`shiftkit.data.SFTRow`; None when its prompt alone exceeds ``max_length``.

        ``max_length`` (0 = no limit) bounds prompt + completion; the completion's end is cut.
        """
        if row.kind == "text":
            ids = list(self.tok(row.text, add_special_tokens=False)["input_ids"])
            if len(ids) < 2:
                raise ShiftkitError(f"{row.where}: text row is shorter than two tokens")
            eos = self.tok.eos_token_id
            p, c = ids[:1], ids[1:] + ([eos] if eos is not None else [])
        elif row.kind == "messages":
            p, c = self._completion_ids(row.messages[:-1], [row.messages[-1]], row.where)
        else:
            p, c = self._completion_ids(row.prompt, row.completion, row.where)
        if max_length and len(p) + len(c) > max_length:
            if len(p) >= max_length:
                return None
            return SFTIds(p, c[: max_length - len(p)], True)
        return SFTIds(p, c, False)

    def check(self, items: list, n: int = 16, max_length: int = 0) -> None:
        """Render the first ``n`` prompts (:class:`shiftkit.data.Example`) or SFT rows, so that a
        template or format error stops a command before it writes anything."""
        for it in list(items)[:n]:
            try:
                if hasattr(it, "kind"):
                    self.encode_sft(it, max_length)
                else:
                    self.ids(it.prompt)
            except ShiftkitError as e:
                raise ShiftkitError(str(e) if str(e).startswith(it.where) else f"{it.where}: {e}") from None

    def encode_sft_batch(self, rows: list, max_length: int = 0) -> tuple[list[SFTIds], dict]:
        """Encoded rows (those whose prompt fits) and ``{"truncated": n, "dropped": n}``."""
        out, stats = [], {"truncated": 0, "dropped": 0}
        for r in rows:
            e = self.encode_sft(r, max_length)
            if e is None:
                stats["dropped"] += 1
                continue
            stats["truncated"] += e.truncated
            out.append(e)
        if not out:
            raise ShiftkitError(f"every row's prompt is longer than max_length={max_length} tokens; raise max_length")
        return out, stats


# --------------------------------------------------------------------------------------------------
# Padding (the layouts of sampling.encode_prompts / encode_completions)
# --------------------------------------------------------------------------------------------------

def left_pad(ids: list[list[int]], pad_id: int, device="cpu"):
    """Left-padded ``(ids_BP, mask_BP)`` (prompts)."""
    import torch

    P = max(1, max(len(x) for x in ids))
    ids_BP = torch.full((len(ids), P), pad_id, dtype=torch.long)
    mask_BP = torch.zeros((len(ids), P), dtype=torch.long)
    for b, x in enumerate(ids):
        if x:
            ids_BP[b, P - len(x):] = torch.tensor(x, dtype=torch.long)
            mask_BP[b, P - len(x):] = 1
    return ids_BP.to(device), mask_BP.to(device)


def right_pad(ids: list[list[int]], pad_id: int, device="cpu"):
    """Right-padded ``(ids_BT, mask_BT)`` (completions)."""
    import torch

    T = max(1, max(len(x) for x in ids))
    ids_BT = torch.full((len(ids), T), pad_id, dtype=torch.long)
    mask_BT = torch.zeros((len(ids), T), dtype=torch.long)
    for b, x in enumerate(ids):
        if x:
            ids_BT[b, : len(x)] = torch.tensor(x, dtype=torch.long)
            mask_BT[b, : len(x)] = 1
    return ids_BT.to(device), mask_BT.to(device)


# the rendering key that is read only with a chat template (shiftkit.config.check_dependent rules)
CHAT_TEMPLATE_RULES = {"chat_template_kwargs": (lambda c: str(c.chat_template).lower() != "false",
                                                "when the chat template is used (chat_template auto|true)")}
