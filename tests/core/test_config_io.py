import dataclasses
import json

import pytest

from shiftkit.config import load_config, parse_overrides
from shiftkit.errors import ShiftkitError
from shiftkit.io import atomic_dir, atomic_write_json, read_jsonl, JsonlWriter


@dataclasses.dataclass
class Cfg:
    a: int = 1
    b: float = 0.5
    name: str = "x"
    flag: bool = False
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["add"])
    opt: float | None = None


def test_defaults_file_and_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("a: 3\nname: y\n")
    cfg = load_config(Cfg, f, ["b=2e-3", "flag=true", "tasks=add,mul", "opt=none"])
    assert (cfg.a, cfg.b, cfg.name, cfg.flag, cfg.tasks, cfg.opt) == (3, 2e-3, "y", True, ["add", "mul"], None)


def test_unknown_key_is_an_error_with_suggestion():
    with pytest.raises(ShiftkitError, match=r"unknown config key 'nmae'.*did you mean 'name'"):
        load_config(Cfg, overrides=["nmae=z"])


def test_bad_type_names_the_key():
    with pytest.raises(ShiftkitError, match="config key 'a'"):
        load_config(Cfg, overrides=["a=1.5"])
    with pytest.raises(ShiftkitError, match="key=value"):
        parse_overrides(["novalue"])


def test_missing_and_bad_config_file(tmp_path):
    with pytest.raises(ShiftkitError, match="not found"):
        load_config(Cfg, tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ShiftkitError, match="mapping"):
        load_config(Cfg, tmp_path / "bad.yaml")


def test_atomic_dir_leaves_nothing_on_failure(tmp_path):
    dst = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with atomic_dir(dst) as tmp:
            (tmp / "half").write_text("x")
            raise RuntimeError("boom")
    assert not dst.exists() and list(tmp_path.iterdir()) == []
    with atomic_dir(dst) as tmp:
        (tmp / "f").write_text("ok")
    assert (dst / "f").read_text() == "ok"


def test_jsonl_roundtrip(tmp_path):
    with JsonlWriter(tmp_path / "m.jsonl") as w:
        w.write({"step": 0, "x": float("nan")})
        w.write({"step": 1, "x": 2.0})
    rows = read_jsonl(tmp_path / "m.jsonl")
    assert rows == [{"step": 0, "x": None}, {"step": 1, "x": 2.0}]
    atomic_write_json(tmp_path / "a.json", {"k": [1, 2]})
    assert json.loads((tmp_path / "a.json").read_text()) == {"k": [1, 2]}


def test_keys_another_key_switches_off_are_errors():
    """A key set away from its default that the run would not read (given the other keys) is an error
    naming the key that would make it count."""
    from shiftkit.evaluate import ModelEvalConfig
    from shiftkit.opd.loop import OPDConfig
    from shiftkit.rl import GRPOConfig
    from shiftkit.sft import SFTConfig

    bad = [(GRPOConfig(model="m", kl_clamp=False), "kl_clamp.*kl_coef"),
           (GRPOConfig(model="m", samples_every=0, samples_n=8), "samples_n.*samples_every"),
           (GRPOConfig(model="m", chat_template="false", chat_template_kwargs={"enable_thinking": False}),
            "chat_template_kwargs"),
           (OPDConfig(student="s", teacher="t", teacher_ref="r", kl_mode="fixed", kl_eps=0.1), "kl_eps.*adaptive"),
           (OPDConfig(student="s", teacher="t", teacher_ref="r", kl_mode="none", kl_coef=1.0), "kl_coef"),
           (OPDConfig(student="s", teacher="t", teacher_ref="r", guard_patience=0, guard_min_eos_rate=0.3), "guard"),
           (ModelEvalConfig(model="m", temperature=0.7), "temperature.*samples"),
           (ModelEvalConfig(model="m", shuffle=True), "shuffle.*max_samples"),
           (SFTConfig(model="m", chat_template="false", chat_template_kwargs={"x": 1}), "chat_template_kwargs")]
    for cfg, msg in bad:
        with pytest.raises(ShiftkitError, match=msg):
            cfg.validate()
    # the same keys are fine once the switch is on
    GRPOConfig(model="m", kl_coef=0.1, kl_clamp=False).validate()
    OPDConfig(student="s", teacher="t", teacher_ref="r", kl_eps=0.1).validate()
    ModelEvalConfig(model="m", samples=4, temperature=0.7, top_p=0.95).validate()
