"""The OpenAI-compatible HTTP client against a real local server serving a real tiny HF model."""

import json
import urllib.request

import pytest

from shiftkit.agent.clients import HFClient, ModelError, OpenAIClient, generate_chat
from shiftkit.agent.episode import AgentConfig, run_episode
from shiftkit.agent.server import ChatServer
from shiftkit.agent.tools import tool_schemas
from shiftkit.kernels.fixtures import PROBLEMS
from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model


@pytest.fixture(scope="module")
def served():
    tok = make_char_tokenizer()
    model = make_tiny_model(TinyModelSpec(hidden_size=32, num_hidden_layers=1, intermediate_size=64, num_attention_heads=2,
                                          num_key_value_heads=1, head_dim=16, max_position_embeddings=8192), seed=3)
    s = ChatServer(model, tok, name="tiny").start()
    yield s, model, tok
    s.stop()


MSGS = [{"role": "user", "content": "Write a kernel."}]


def test_client_gets_the_models_own_generation(served):
    s, model, tok = served
    at = OpenAIClient(s.url, "tiny").chat(MSGS, [], max_tokens=12)
    text, n_p, n_c, _ = generate_chat(model, tok, MSGS, None, 12)  # same model, in process, greedy
    assert at.message["content"] == text and at.completion_tokens == n_c and 1 <= n_c <= 12
    assert HFClient(model, tok).chat(MSGS, [], max_tokens=12).completion_tokens == n_c
    assert at.prompt_tokens == len(tok("<|user|>\nWrite a kernel.<|end|>\n<|assistant|>\n", add_special_tokens=False)["input_ids"])
    other = OpenAIClient(s.url, "tiny", temperature=1.0, seed=5).chat(MSGS, [], max_tokens=12)
    assert other.message["content"] != at.message["content"]  # sampling really happens server-side
    with urllib.request.urlopen(s.url + "/models") as r:
        assert json.loads(r.read())["data"][0]["id"] == "tiny"


def test_http_errors_are_model_errors(served):
    s, _, _ = served
    req = urllib.request.Request(s.url + "/chat/completions", data=b"{not json", method="POST",
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 400
    with pytest.raises(ModelError, match="HTTP 400"):
        OpenAIClient(s.url).chat([], [], 4)
    with pytest.raises(ModelError, match="unreachable"):
        OpenAIClient("http://127.0.0.1:9", timeout_s=3).chat(MSGS, [], 4)


def test_agent_episode_through_the_server(served, tmp_path):
    s, _, _ = served
    res = run_episode(PROBLEMS / "scale_shift_clamp.py", OpenAIClient(s.url, "tiny"),
                      AgentConfig(max_turns=2, max_tokens_per_turn=16, final_eval="none"), tmp_path / "t.jsonl")
    # an untrained model never calls a tool: the loop answers, counts and ends at the turn budget
    assert res["outcome"] == "max_turns" and res["counts"]["turns"] == 2
    assert res["counts"]["no_tool_call"] + res["counts"]["malformed"] >= 2 and res["final_reward"] == -1.0
    assert tool_schemas()[0]["type"] == "function"
