"""`tuner trace record|import|stats` and `tuner replay` through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.cli import main


@pytest.fixture
def recorded(tiny_model, tmp_path, capsys):
    path = tmp_path / "tiny.npz"
    assert main(["trace", "record", "--tokens", "60", "-o", str(path), "--model",
                 str(tiny_model), "--expert-cache", "16", "--io-workers", "3",
                 "--io-urgent", "1"]) == 0
    return path


def run_json(capsys, *argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_record_then_replay_each_policy(recorded, capsys):
    out = capsys.readouterr().out
    assert "60 tokens x 4 layers x top-4 of 16 experts" in out
    live_hits = int(out.split(" hits,")[0].rsplit(" ", 1)[1])
    got = {p: run_json(capsys, "replay", str(recorded), "--policy", p)["totals"]
           for p in ("lru", "2q", "opt")}
    assert got["lru"]["hits"] == live_hits  # --slots defaults to the recorded arena
    assert got["opt"]["misses"] <= min(got["lru"]["misses"], got["2q"]["misses"])
    assert main(["replay", str(recorded), "--policy", "opt", "--slots", "8"]) == 0
    text = capsys.readouterr().out
    assert "policy opt, arena 8 slots" in text and "\n  all " in text


def test_replay_sweep(recorded, capsys):
    capsys.readouterr()
    out = run_json(capsys, "replay", str(recorded), "--sweep")
    assert out["sizes"] == [4, 8, 12, 16, 24, 32]
    assert len(out["layers"]) == 4 and len(out["totals"]["marginal_hits_per_slot"]) == 5
    assert main(["replay", str(recorded), "--sizes", "8,16", "--policy", "2q"]) == 0
    assert "8-16" in capsys.readouterr().out


def test_stats(recorded, capsys):
    capsys.readouterr()
    out = run_json(capsys, "trace", "stats", str(recorded), "--slots", "8,16")["traces"]
    assert len(out) == 1 and out[0]["arena_slots"] == [8, 16] and out[0]["tokens"] == 60
    assert all(len(r["hit_rate"][c]) == 2 for r in out[0]["layers"]
               for c in ("lru", "2q", "opt", "static"))
    assert main(["trace", "stats", str(recorded)]) == 0
    text = capsys.readouterr().out
    assert "prev-token slot overlap, %" in text and "12.5  25.0  50.0  75.0" in text


def test_stats_side_by_side(recorded, tmp_path, capsys):
    imported = tmp_path / "csv.npz"
    fixtures = Path(__file__).parent / "fixtures"
    assert main(["trace", "import", "csv", str(fixtures / "csv"), "-o", str(imported)]) == 0
    capsys.readouterr()
    out = run_json(capsys, "trace", "stats", str(recorded), str(imported))["traces"]
    assert [t["file"] for t in out] == [str(recorded), str(imported)]
    assert out[1]["totals"]["stale_pct"] is None and out[1]["sequences"] == 2
    assert main(["trace", "stats", str(recorded), str(imported)]) == 0
    text = capsys.readouterr().out
    rows = text.splitlines()
    assert rows[rows.index("") + 1].split() == ["tiny.npz", "csv.npz"]  # one column each
    assert "tiny.npz per layer:" in text and "csv.npz per layer:" in text


def test_import_prints_the_report(tmp_path, capsys):
    src = tmp_path / "r.csv"
    src.write_text("layer,token,experts\n0,0,1 2\n1,0,2 3\n0,1,4 4\n0,2,1 3\n1,2,0 1\n")
    out_path = tmp_path / "r.npz"
    assert main(["trace", "import", "csv", str(src), "-o", str(out_path)]) == 0
    text = capsys.readouterr().out
    assert "duplicate_id: 1 - an expert named twice" in text
    assert "missing_layer: 1" in text and "e.g. sequence 0 token 1: no routing for layer 1" in text
    report = run_json(capsys, "trace", "import", "csv", str(src), "-o", str(out_path))
    assert report["problems"]["duplicate_id"]["count"] == 1
    assert main(["replay", str(out_path), "--slots", "4"]) == 0
    assert "note: imported with odd rows (duplicate_id 1, missing_layer 1)" in \
        capsys.readouterr().out


def test_a_failed_import_prints_its_report_then_the_reason(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"layer": 0, "token_idx": "one", "experts": [1]}\n')
    assert main(["trace", "import", "jsonl", str(src), "-o", str(tmp_path / "x.npz")]) == 2
    out, err = capsys.readouterr()
    assert "unreadable: 1" in out and "e.g. bad.jsonl:1: token_idx must be an integer" in out
    assert err.strip() == "tuner trace import: jsonl bad.jsonl: no routings found"
    assert not (tmp_path / "x.npz").exists()


def test_bad_inputs_exit_2_with_a_message(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "none.npz")]) == 2
    assert "no such file" in capsys.readouterr().err
    src = tmp_path / "r.jsonl"
    src.write_text('{"layer": 0, "token_idx": 0, "experts": [1]}\n')
    trace = tmp_path / "r.npz"
    assert main(["trace", "import", "jsonl", str(src), "-o", str(trace)]) == 0
    assert main(["replay", str(trace)]) == 2  # an imported trace has no recorded arena
    assert "give --slots" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["replay", str(trace), "--policy", "fifo"])
    assert "invalid choice: 'fifo'" in capsys.readouterr().err
