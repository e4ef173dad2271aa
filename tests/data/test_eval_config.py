"""configs/eval/aime.yaml: the papers' protocol, in the key names of the data / prompt / reward layers."""

from pathlib import Path

import yaml

from shiftkit.data import DataArgs
from shiftkit.prompts import DAPO_TEMPLATE, PromptKeys, resolve_template
from shiftkit.rewards import RewardKeys, Rewards

AIME = Path(__file__).resolve().parents[2] / "configs" / "eval" / "aime.yaml"
EVAL_KEYS = {"samples", "temperature", "top_p", "max_new_tokens", "greedy", "seed"}  # the eval command's own keys


def test_aime_protocol():
    cfg = yaml.safe_load(AIME.read_text())
    assert (cfg["samples"], cfg["temperature"], cfg["top_p"], cfg["max_new_tokens"]) == (32, 0.7, 0.95, 32768)
    layer_keys = set(DataArgs.__dataclass_fields__) | set(PromptKeys.__dataclass_fields__) | set(
        RewardKeys.__dataclass_fields__)
    assert set(cfg) <= layer_keys | EVAL_KEYS, set(cfg) - layer_keys - EVAL_KEYS
    data = DataArgs(**{k: v for k, v in cfg.items() if k in DataArgs.__dataclass_fields__})
    assert (data.data, data.prompt_key, data.answer_key) == ("Maxwell-Jia/AIME_2024", "Problem", "Answer")
    prompt = PromptKeys(**{k: v for k, v in cfg.items() if k in PromptKeys.__dataclass_fields__})
    assert resolve_template(prompt.template) == DAPO_TEMPLATE
    assert Rewards(cfg["reward"]).names == ["math"]
