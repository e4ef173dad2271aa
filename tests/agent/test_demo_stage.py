"""The demo stage runs in its quick preset and returns its report section."""

from types import SimpleNamespace

import pytest


@pytest.mark.slow
def test_demo_stage_quick(tmp_path):
    from shiftkit.recipes.agent_toy import demo_stage

    r = demo_stage({"cfg": SimpleNamespace(threads=1, progress=False, seeds=[0]), "out": tmp_path, "preset": "quick"})
    assert r["report"][0] == "## 5. Kernel agent"
    assert r["scripted_episode"]["outcome"] == "finished" and r["toy_rl"]["steps"] == 2
    assert (tmp_path / "agent" / "scripted_episode.jsonl").is_file()
