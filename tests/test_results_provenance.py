"""Every committed results file says where it came from (benchmarks/common.py; the guide's rule for results).

Each ``benchmarks/results/*.json`` carries ``command`` (how to reproduce it), ``commit`` (the tree it ran on),
``matched`` (the settings shared by whatever it compares) and ``peer``: the peer's name and version, or
``None`` with ``peer_note`` saying why there is none. A file with a peer also carries ``ratio`` (peer median
/ shiftkit median), a min/median/max spread and the machine's load average. No benchmarking here: the keys
only.
"""

import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
FILES = sorted(RESULTS.glob("*.json"))
# files another change owns and has not brought up to the rule yet, with what each lacks (checked below, so
# an entry must go as soon as its file is fixed)
PENDING: dict[str, set[str]] = {}


def has_spread(x) -> bool:
    if isinstance(x, dict):
        return {"min", "median", "max"} <= set(x) or any(has_spread(v) for v in x.values())
    if isinstance(x, list):
        return any(has_spread(v) for v in x)
    return False


def has_load(x) -> bool:
    if isinstance(x, dict):
        return any(k.startswith(("load_avg", "loadavg")) for k in x) or any(has_load(v) for v in x.values())
    return False


def missing(d: dict) -> set[str]:
    out = set()
    for k in ("command", "commit"):
        if not (isinstance(d.get(k), str) and d[k].strip()):
            out.add(k)
    if not d.get("matched"):
        out.add("matched")
    peer = d.get("peer", "absent")
    if peer is None:
        if not (isinstance(d.get("peer_note"), str) and d["peer_note"].strip()):
            out.add("peer_note")
    elif not (isinstance(peer, dict) and peer.get("name") and peer.get("version")):
        out.add("peer")
    else:
        if not isinstance(d.get("ratio"), (int, float)) or not d["ratio"] > 0:
            out.add("ratio")
        if not has_spread(d):
            out.add("min/median/max")
        if not has_load(d):
            out.add("load_avg")
    return out


def test_there_are_results_files():
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_results_file_carries_its_provenance(path):
    d = json.loads(path.read_text())
    assert isinstance(d, dict), path.name
    lacks = missing(d)
    if path.name in PENDING:
        assert lacks and lacks <= PENDING[path.name], f"{path.name}: fixed? drop it from PENDING (lacks {lacks})"
        return
    assert not lacks, f"{path.name} lacks {sorted(lacks)}"


def test_the_check_catches_a_file_without_provenance():
    good = {"command": "python benchmarks/x.py", "commit": "abc1234", "matched": {"threads": 1},
            "peer": {"name": "trl", "version": "1.16.0"}, "ratio": 1.2, "load_avg": [1, 1, 1],
            "sides": {"a": {"min": 1, "median": 2, "max": 3}}}
    assert missing(good) == set()
    assert missing({**good, "ratio": None}) == {"ratio"}
    assert missing({**good, "peer": {"name": "trl"}}) == {"peer"}
    assert missing({k: v for k, v in good.items() if k != "commit"}) == {"commit"}
    assert missing({**good, "peer": None}) == {"peer_note"}
    assert missing({**good, "peer": None, "peer_note": "no peer: an experiment"}) == set()
    assert missing({k: v for k, v in good.items() if k not in ("sides", "load_avg")}) == {"min/median/max", "load_avg"}


def test_the_sar_speedup_is_at_equal_fidelity():
    """sar_bench.json's ratio counts only if every timed edit is within the bound of the exact one."""
    d = json.loads((RESULTS / "sar_bench.json").read_text())
    rows = [r for v in d["deltas"].values() for r in v["per_matrix"].values()]
    assert rows and d["edit_rel_diff_max"] == max(r["default_rel_diff"] for r in rows)
    assert d["edit_rel_diff_max"] <= 1e-3 and "1e-3" in d["bound"]
