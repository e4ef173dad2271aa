import json
from pathlib import Path

import pytest

from shiftkit.models import WEAK_SPEC, make_char_tokenizer, make_tiny_model, save_model


def _save(path: Path, seed: int, tok=None) -> str:
    save_model(make_tiny_model(WEAK_SPEC, seed=seed), tok or make_char_tokenizer(), path)
    return str(path)


@pytest.fixture(scope="session")
def trio(tmp_path_factory):
    """Random-init weak-spec student / teacher / reference (distinct weights, same tokenizer)."""
    d = tmp_path_factory.mktemp("trio")
    return {name: _save(d / name, seed) for name, seed in (("student", 0), ("teacher", 1), ("ref", 2))}


@pytest.fixture(scope="session")
def swapped_vocab_model(tmp_path_factory):
    """A model whose tokenizer maps 'a' and 'b' to each other's ids."""
    p = _save(tmp_path_factory.mktemp("swap") / "m", 3)
    f = Path(p) / "tokenizer.json"
    tj = json.loads(f.read_text())
    v = tj["model"]["vocab"]
    v["a"], v["b"] = v["b"], v["a"]
    f.write_text(json.dumps(tj))
    return p
