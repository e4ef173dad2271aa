import pytest
import torch

from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model, save_model

PICO = TinyModelSpec(hidden_size=32, num_hidden_layers=2, intermediate_size=64, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=8)


@pytest.fixture(scope="session")
def tok():
    return make_char_tokenizer()


@pytest.fixture
def pico(tok):
    return make_tiny_model(PICO, vocab_size=len(tok), seed=0)


@pytest.fixture
def pico_dir(tmp_path, pico, tok):
    d = tmp_path / "pico"
    save_model(pico, tok, d)
    return str(d)


@pytest.fixture
def length_reward(monkeypatch):
    """Reward = completion length: every group has signal, whatever the (random) model says."""
    from shiftkit.tasks import Mixture

    monkeypatch.setattr(Mixture, "reward", lambda self, problem, completion: float(len(completion)))


@pytest.fixture(autouse=True)
def _fp32_default():
    torch.manual_seed(0)
    yield
