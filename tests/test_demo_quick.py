"""`shiftkit demo --preset quick`: the whole pipeline end to end on tiny settings."""

import json
import subprocess
import sys
import time

import pytest


@pytest.mark.slow
def test_quick_demo_writes_report(tmp_path):
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "shiftkit", "demo", "--preset", "quick", "--out", str(tmp_path / "demo"),
                        "--json"], capture_output=True, text=True, timeout=600,
                       env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"})
    assert p.returncode == 0, p.stderr[-4000:]
    summary = json.loads(p.stdout)
    report = (tmp_path / "demo" / "report.md").read_text()
    assert "## 1. The toy world" in report and "## 2. GRPO on the weak model" in report
    for png in ("grpo_reward.png", "grpo_accuracy.png", "passk_world.png"):
        assert (tmp_path / "demo" / png).stat().st_size > 1000
    results = json.loads((tmp_path / "demo" / "results.json").read_text())
    assert set(results["world"]["models"]) == {"weak", "strong"}
    assert summary["report"].endswith("report.md")
    print(f"quick demo took {time.time() - t0:.0f} s (stage timings: {results['timings']})")
