"""The dataset layer: every source kind, TRL's row formats, column mapping, order, and one-line errors."""

import csv
import json

import pytest

from shiftkit.data import ArithSource, DataArgs, Example, load_eval, load_prompts, load_sft, read_splits
from shiftkit.errors import ShiftkitError

ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i), "level": i % 3} for i in range(10)]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def qa_jsonl(tmp_path):
    return write_jsonl(tmp_path / "qa.jsonl", ROWS)


def args(data, **kw):
    return DataArgs(data=str(data), prompt_key=kw.pop("prompt_key", "question"), **kw)


def prompts_of(ds):
    return [e.prompt for e in ds]


# ---- sources ---------------------------------------------------------------------------------------

def test_file_formats_give_the_same_rows(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    write_jsonl(tmp_path / "a.jsonl", ROWS)
    (tmp_path / "a.json").write_text(json.dumps(ROWS))
    (tmp_path / "cols.json").write_text(json.dumps({k: [r[k] for r in ROWS] for k in ROWS[0]}))
    with open(tmp_path / "a.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ROWS[0]))
        w.writeheader()
        w.writerows(ROWS)
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "a.parquet")
    (tmp_path / "a.txt").write_text("".join(r["question"] + "\n\n" for r in ROWS))
    ref = load_prompts(args(tmp_path / "a.jsonl", shuffle=False))
    assert prompts_of(ref) == [r["question"] for r in ROWS]
    assert [e.answer for e in ref] == [r["answer"] for r in ROWS]
    for name in ("a.json", "cols.json", "a.csv", "a.parquet"):
        ds = load_prompts(args(tmp_path / name, shuffle=False))
        assert prompts_of(ds) == prompts_of(ref), name
        assert [e.answer for e in ds] == [e.answer for e in ref], name
    txt = load_prompts(DataArgs(data=str(tmp_path / "a.txt"), shuffle=False))  # one prompt per line
    assert prompts_of(txt) == prompts_of(ref) and txt[1].where.endswith("a.txt:3")
    # extra columns pass through (csv gives strings, like pandas' dtype=str)
    assert load_prompts(args(tmp_path / "a.jsonl", shuffle=False))[4].columns["level"] == 1
    assert load_prompts(args(tmp_path / "a.csv", shuffle=False))[4].columns["level"] == "1"


def test_save_to_disk_and_split_folders(tmp_path):
    datasets = pytest.importorskip("datasets")
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS[:7]),
                               "test": datasets.Dataset.from_list(ROWS[7:])})
    dd.save_to_disk(str(tmp_path / "disk"))
    assert set(read_splits(str(tmp_path / "disk"))) == {"train", "test"}
    tr = load_prompts(args(tmp_path / "disk", shuffle=False))
    assert prompts_of(tr) == [r["question"] for r in ROWS[:7]]
    te = load_eval(args(tmp_path / "disk"))  # eval defaults to the test split
    assert prompts_of(te) == [r["question"] for r in ROWS[7:]]
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "one"))
    assert len(load_prompts(args(tmp_path / "one"))) == 10
    assert len(load_eval(args(tmp_path / "one"))) == 10  # eval wants "test"; a dataset with one split uses it
    with pytest.raises(ShiftkitError, match=r"has no split 'validation' \(splits: train, test\)"):
        load_prompts(args(tmp_path / "disk", split="validation"))


def make_hub_cache(root, repo_id, rows):
    folder = root / ("datasets--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = folder / "snapshots" / commit / "data"
    snap.mkdir(parents=True)
    write_jsonl(snap / "train.jsonl", rows[:8])
    write_jsonl(snap / "test.jsonl", rows[8:])
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)


def test_cached_hub_dataset_loads_offline_and_uncached_fails_fast(tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    import time

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    make_hub_cache(tmp_path / "hub", "someone/wordy", ROWS)
    ds = load_prompts(args("someone/wordy", shuffle=False))
    assert prompts_of(ds) == [r["question"] for r in ROWS[:8]]
    assert ds[0].where == "someone/wordy[train] row 1"
    assert len(load_eval(args("someone/wordy"))) == 2
    t0 = time.time()
    with pytest.raises(ShiftkitError) as e:
        load_prompts(args("someone/not-cached"))
    assert time.time() - t0 < 5
    msg = str(e.value)
    assert "not in the local cache" in msg and str(tmp_path / "hub") in msg and "\n" not in msg


def test_arith_is_a_source_with_the_loops_draws():
    import random

    from shiftkit.tasks import Mixture, eval_set

    src = load_prompts(DataArgs(data="arith:add,mul"))
    assert isinstance(src, ArithSource) and src.names == ["add", "mul"]
    mix = Mixture(["add", "mul"])
    rng = random.Random("rl:3:5")  # the GRPO / OPD loops' stream
    want = [mix.sample(rng, "train") for _ in range(6)]
    got = src.draw(3, 5, 6)
    assert [e.prompt for e in got] == [p.prompt for p in want]
    assert [e.answer for e in got] == [p.answer for p in want] and got[0].problem == want[0]
    rng = random.Random("sft:1:2")  # the SFT loop's stream: a trace right after each problem
    want_sft = []
    for _ in range(4):
        p = mix.sample(rng, "train")
        want_sft.append((p.prompt, mix.trace(p, rng, 0.6)))
    sft = load_sft(DataArgs(data="arith:add,mul"), error_rate=0.6)
    assert [(r.prompt, r.completion) for r in sft.draw_sft(1, 2, 4)] == want_sft
    ev = load_eval(DataArgs(data="arith:add,mul", arith_n=5))
    assert [e.prompt for e in ev] == [p.prompt for p in eval_set(["add", "mul"], 5)]
    assert ev[0].columns["domain"] == "add"
    with pytest.raises(ShiftkitError, match="unknown task 'div'"):
        load_prompts(DataArgs(data="arith:add,div"))
    with pytest.raises(ShiftkitError, match="name the arithmetic domains"):
        load_prompts(DataArgs(data="arith:"))


# ---- column mapping and TRL conventions -------------------------------------------------------------

def test_column_mapping_system_prompt_and_conversational_prompts(tmp_path):
    p = write_jsonl(tmp_path / "c.jsonl", [
        {"prompt": [{"role": "user", "content": "Hi?"}], "solution": "#### 3", "id": 7},
        {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Yo?"}],
         "solution": "4", "id": 8}])
    ds = load_prompts(DataArgs(data=str(p), answer_key="solution", shuffle=False, system_prompt="You add."))
    assert ds[0].prompt == [{"role": "system", "content": "You add."}, {"role": "user", "content": "Hi?"}]
    assert ds[1].prompt[0]["content"] == "Be brief."  # an existing system message is kept
    assert ds[0].answer == "#### 3" and ds[0].columns == {"solution": "#### 3", "id": 7, "answer": "#### 3"}
    s = load_prompts(args(tmp_path / "qa.jsonl" if False else write_jsonl(tmp_path / "q.jsonl", ROWS),
                          system_prompt="S", shuffle=False))
    assert s[0].prompt == [{"role": "system", "content": "S"}, {"role": "user", "content": ROWS[0]["question"]}]
    n = write_jsonl(tmp_path / "n.jsonl", [{"question": "q", "answer": 12.0}])
    assert load_prompts(args(n))[0].answer == "12"


def test_sft_formats(tmp_path):
    pc = write_jsonl(tmp_path / "pc.jsonl", [{"prompt": "2+2=", "completion": "4"}])
    r = load_sft(DataArgs(data=str(pc)))[0]
    assert (r.kind, r.prompt, r.completion) == ("prompt_completion", "2+2=", "4")
    conv = write_jsonl(tmp_path / "conv.jsonl", [{"prompt": [{"role": "user", "content": "a"}],
                                                  "completion": [{"role": "assistant", "content": "b"}]}])
    assert load_sft(DataArgs(data=str(conv)))[0].completion == [{"role": "assistant", "content": "b"}]
    msgs = write_jsonl(tmp_path / "m.jsonl", [{"messages": [{"role": "user", "content": "a"},
                                                            {"role": "assistant", "content": "b"}]}])
    r = load_sft(DataArgs(data=str(msgs)))[0]
    assert r.kind == "messages" and r.messages[-1]["content"] == "b"
    txt = write_jsonl(tmp_path / "t.jsonl", [{"text": "once upon a time"}])
    assert load_sft(DataArgs(data=str(txt)))[0].kind == "text"
    q = write_jsonl(tmp_path / "q.jsonl", [{"question": "a", "solution": "b"}])
    r = load_sft(DataArgs(data=str(q), prompt_key="question", completion_key="solution"))[0]
    assert (r.prompt, r.completion) == ("a", "b")
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"messages": [{"role": "user", "content": "a"}]}])
    with pytest.raises(ShiftkitError, match=r"bad.jsonl:1: the last message must be the assistant's"):
        load_sft(DataArgs(data=str(bad)))
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [{"prompt": "a", "completion": [{"role": "assistant",
                                                                                  "content": "b"}]}])
    with pytest.raises(ShiftkitError, match="both be strings or both be chat messages"):
        load_sft(DataArgs(data=str(mixed)))
    with pytest.raises(ShiftkitError, match=r"SFT rows need 'prompt'\+'completion', 'messages' or 'text' columns; "
                                            r"columns: question, answer, level"):
        load_sft(DataArgs(data=str(write_jsonl(tmp_path / "qa.jsonl", ROWS))))


# ---- order and size ---------------------------------------------------------------------------------

def test_shuffle_max_samples_and_eval_split(qa_jsonl):
    base = prompts_of(load_prompts(args(qa_jsonl, shuffle=False)))
    s0 = prompts_of(load_prompts(args(qa_jsonl), seed=0))
    assert sorted(s0) == sorted(base) and s0 != base
    assert s0 == prompts_of(load_prompts(args(qa_jsonl), seed=0))
    assert s0 != prompts_of(load_prompts(args(qa_jsonl), seed=1))
    assert prompts_of(load_prompts(args(qa_jsonl, shuffle=False, max_samples=3))) == base[:3]
    assert prompts_of(load_prompts(args(qa_jsonl, max_samples=3), seed=0)) == s0[:3]
    ds = load_prompts(args(qa_jsonl, eval_split="0.2"), seed=0)
    held = prompts_of(ds.eval)
    assert len(held) == 2 and len(ds) == 8 and not set(held) & set(prompts_of(ds))
    assert prompts_of(load_prompts(args(qa_jsonl, eval_split="0.2"), seed=5).eval) == held  # not the run seed
    with pytest.raises(ShiftkitError, match="a fraction must be in"):
        load_prompts(args(qa_jsonl, eval_split="1.5"))


def test_draw_walks_seeded_epochs_and_is_a_function_of_seed_and_step(qa_jsonl):
    ds = load_prompts(args(qa_jsonl, shuffle=False))
    assert [e.prompt for e in ds.draw(0, 0, 4)] == prompts_of(ds)[:4]
    assert [e.prompt for e in ds.draw(0, 2, 4)] == prompts_of(ds)[8:] + prompts_of(ds)[:2]  # wraps into epoch 1
    sh = load_prompts(args(qa_jsonl), seed=0)
    epoch0 = [e.prompt for s in range(5) for e in sh.draw(0, s, 2)]
    assert sorted(epoch0) == sorted(prompts_of(sh))  # each row once per epoch
    epoch1 = [e.prompt for s in range(5, 10) for e in sh.draw(0, s, 2)]
    assert sorted(epoch1) == sorted(epoch0) and epoch1 != epoch0  # a new order each epoch
    fresh = load_prompts(args(qa_jsonl), seed=0)
    assert [e.prompt for e in fresh.draw(0, 7, 2)] == epoch1[4:6]  # resume: same batch without replaying


# ---- bad input: one line, naming file / row / column ---------------------------------------------

@pytest.mark.parametrize("rows,kw,pattern", [
    (ROWS, {"prompt_key": "problem"}, r"qa.jsonl: no column 'problem' \(prompt_key\); columns: question, answer, level"),
    ([{"prompt": "x"}], {"prompt_key": "prompt"}, r"no column 'answer' \(answer_key, needed by reward 'math'\); "
                                                  r"columns: prompt"),
    ([{"question": "a", "answer": "1"}, {"q": "b"}], {}, r"qa.jsonl:2: no column 'question' \(prompt_key\); columns: q"),
    ([{"question": 5, "answer": "1"}], {}, r"qa.jsonl:1: column 'question' must be a string or a list of chat"),
    ([{"question": "  ", "answer": "1"}], {}, r"qa.jsonl:1: column 'question' is empty"),
    ([{"question": [{"content": "x"}], "answer": "1"}], {}, r"qa.jsonl:1: column 'question' message 0 must be"),
    ([{"question": "a", "answer": None}], {}, r"qa.jsonl:1: column 'answer' is null \(needed by reward 'math'\)"),
])
def test_bad_rows_are_one_line_errors(tmp_path, rows, kw, pattern):
    p = write_jsonl(tmp_path / "qa.jsonl", rows)
    with pytest.raises(ShiftkitError, match=pattern) as e:
        load_prompts(args(p, **kw), need_answer="reward 'math'")
    assert "\n" not in str(e.value)


def test_bad_files_are_one_line_errors(tmp_path):
    (tmp_path / "e.jsonl").write_text("\n\n")
    (tmp_path / "broken.jsonl").write_text('{"question": "a"}\n{"question": \n')
    (tmp_path / "list.jsonl").write_text('[1, 2]\n')
    (tmp_path / "x.json").write_text('{"question": "a"}\n{"question": "b"}\n')
    (tmp_path / "x.tsv").write_text("hi")
    (tmp_path / "head.csv").write_text("question,answer\n")
    cases = [
        ("e.jsonl", r"dataset .*e.jsonl is empty"),
        ("broken.jsonl", r"broken.jsonl:2: not valid JSON"),
        ("list.jsonl", r"list.jsonl:1: expected a JSON object per line, got list"),
        ("x.json", r"x.json: not valid JSON .* \(one object per line\? name it .jsonl\)"),
        ("x.tsv", r"unknown data file type '.tsv'"),
        ("head.csv", r"dataset .*head.csv is empty"),
        ("missing.jsonl", r"data file not found: .*missing.jsonl"),
    ]
    for name, pattern in cases:
        with pytest.raises(ShiftkitError, match=pattern) as e:
            load_prompts(args(tmp_path / name))
        assert "\n" not in str(e.value), name
    with pytest.raises(ShiftkitError, match=r"is a single file \(one split\); drop split=test"):
        load_prompts(args(write_jsonl(tmp_path / "ok.jsonl", ROWS), split="test"))
    with pytest.raises(ShiftkitError, match="max_samples must be >= 0"):
        load_prompts(args(tmp_path / "ok.jsonl", max_samples=-1))
    with pytest.raises(ShiftkitError, match="no data given"):
        load_prompts(DataArgs())


def test_data_args_from_any_config():
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        data: str = "x.jsonl"
        prompt_key: str = "question"
        lr: float = 1e-5

    a = DataArgs.from_config(Cfg())
    assert (a.data, a.prompt_key, a.answer_key) == ("x.jsonl", "question", "answer")
    assert isinstance(Example("p", None, {}, "w"), Example)


def test_hub_dataset_subsets(tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    folder = tmp_path / "hub" / "datasets--org--gsm"
    snap = folder / "snapshots" / ("a" * 40)
    for sub in ("main", "socratic"):
        (snap / sub).mkdir(parents=True)
        write_jsonl(snap / sub / "train-00000.jsonl", [{"question": f"{sub} q", "answer": "x\n#### 1"}])
        write_jsonl(snap / sub / "test-00000.jsonl", [{"question": f"{sub} t", "answer": "#### 2"}])
    (snap / "README.md").write_text("---\nconfigs:\n" + "".join(
        f"- config_name: {s}\n  data_files:\n  - split: train\n    path: {s}/train-*\n"
        f"  - split: test\n    path: {s}/test-*\n" for s in ("main", "socratic")) + "---\n")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("a" * 40)
    assert prompts_of(load_prompts(args("org/gsm", subset="socratic"))) == ["socratic q"]
    assert prompts_of(load_eval(args("org/gsm", subset="main"))) == ["main t"]
    with pytest.raises(ShiftkitError, match=r"cannot read hub dataset 'org/gsm' .*choose one with subset=<name>"):
        load_prompts(args("org/gsm"))
