"""Importers on small hand-written route logs, odd rows included: every odd row is counted
and shown, never silently dropped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tuner.engine.trace_format import TraceError
from tuner.traces.importers import import_trace


def lines(*rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def problems(trace) -> dict[str, int]:
    return {kind: p["count"] for kind, p in trace.meta["import_problems"].items()}


def test_jsonl_clean_layer_major_with_probs(tmp_path):
    src = tmp_path / "routes.jsonl"
    src.write_text(lines(
        *({"layer": l, "token_idx": t, "experts": [t, t + 1], "probs": [0.6, 0.4]}
          for l in (0, 1) for t in range(3))))
    trace = import_trace("jsonl", src, model="mine", expert_bytes=100)
    assert trace.experts.tolist() == [[[0, 1], [0, 1]], [[1, 2], [1, 2]], [[2, 3], [2, 3]]]
    assert np.allclose(trace.probs[..., 0], 0.6)
    assert trace.meta["import_problems"] == {}
    assert (trace.meta["model"], trace.expert_bytes, trace.num_experts) == ("mine", 100, 4)
    assert trace.meta["num_experts_inferred"] is True and trace.sequence_starts == [0]


def test_jsonl_odd_rows_are_reported(tmp_path):
    src = tmp_path / "odd.jsonl"
    src.write_text(lines(
        {"layer": 0, "token_idx": 0, "experts": [1, 2]},
        {"layer": 1, "token_idx": 0, "experts": [3, 4]},
        "{not json",
        {"layer": 0, "token_idx": 1, "experts": [5, 5]},  # duplicate id
        {"layer": 1, "token_idx": 1, "experts": [9, 2]},  # 9 >= num_experts 8
        {"layer": 0, "token_idx": 2, "experts": [-3, 2, 1]},  # negative id, k 3
        {"layer": 0, "token_idx": 2, "probs": [1.0]},  # no experts
        {"layer": 1, "token_idx": 0, "experts": [6, 7], "probs": [1.0]},  # restart; bad probs
        "",
        {"layer": 0, "token_idx": 0, "experts": [0, 1]},  # restart at layer 0 too
    ))
    trace = import_trace("jsonl", src, num_experts=8)
    assert problems(trace) == {"unreadable": 2, "duplicate_id": 1, "out_of_range": 1,
                               "negative_id": 1, "wrong_k": 1, "restart": 2,
                               "missing_layer": 1, "probs_mismatch": 1}
    # tokens: (seq 0, 0), (seq 0, 1), (seq 0, 2), (seq 1, 0); k = the widest routing, 3
    assert trace.experts.tolist() == [
        [[1, 2, -1], [3, 4, -1]],
        [[5, -1, -1], [-1, 2, -1]],
        [[-1, 2, 1], [-1, -1, -1]],  # layer 1 has no routing at token 2
        [[0, 1, -1], [6, 7, -1]],
    ]
    assert trace.sequence_starts == [0, 3] and trace.probs is None
    report = trace.meta["import_problems"]
    assert report["missing_layer"]["examples"] == ["sequence 0 token 2: no routing for layer 1"]
    assert report["unreadable"]["examples"][0].startswith("odd.jsonl:3: not JSON")
    assert "no 'experts'" in report["unreadable"]["examples"][1]
    assert report["out_of_range"]["examples"] == ["odd.jsonl:5: expert 9 >= 8"]


def test_vllm_folder_of_per_layer_logs(tmp_path):
    def route(req, idx, layer, ids):
        return {"type": "route", "req_id": req, "token_idx": idx, "layer": layer,
                "topk_ids": ids, "topk_weights": [0.5] * len(ids)}

    meta = {"type": "meta", "model_id": "Qwen/Qwen1.5-MoE-A2.7B-Chat", "top_k": 2}
    for layer, short in ((2, False), (10, True)):
        rows = [route("r1", 0, layer, [0, 1]), route("r1", 1, layer, [1, 2]),
                route("r1", 0, layer, [2, 3]),  # a decode batch: token_idx restarts
                route("r2", 0, layer, [3, 4])]  # a new request
        (tmp_path / f"moe_layer{layer}.jsonl").write_text(
            lines({**meta, "layers_logged": [layer]}, *(rows[:-1] if short else rows)))
    trace = import_trace("vllm", tmp_path, num_experts=60)
    assert trace.meta["model"] == "Qwen/Qwen1.5-MoE-A2.7B-Chat"
    assert trace.meta["layer_ids"] == [2, 10]
    assert trace.experts.tolist() == [[[0, 1], [0, 1]], [[1, 2], [1, 2]], [[2, 3], [2, 3]],
                                      [[3, 4], [-1, -1]]]
    assert problems(trace) == {"restart": 3, "missing_layer": 1}
    assert trace.sequence_starts == [0, 3]
    assert trace.probs.shape == (4, 2, 2)


def test_vllm_needs_a_folder_of_jsonl(tmp_path):
    single = tmp_path / "moe_layer0.jsonl"
    single.write_text("")
    with pytest.raises(TraceError, match="a folder of per-layer .jsonl files"):
        import_trace("vllm", single)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError, match="no .jsonl files"):
        import_trace("vllm", empty)


def test_csv_one_row_per_routing(tmp_path):
    src = tmp_path / "r.csv"
    src.write_text("Layer,Token_idx,experts\n"
                   '0,0,"[4, 1, 2]"\n'
                   "1,0,3;0;1\n"
                   "0,1,1 2 3\n"
                   "1,1,2|0\n"  # k 2
                   "1,x,1 2 3\n"  # unreadable
                   "0\n")  # short row
    trace = import_trace("csv", src)
    assert trace.experts.tolist() == [[[4, 1, 2], [3, 0, 1]], [[1, 2, 3], [2, 0, -1]]]
    assert problems(trace) == {"wrong_k": 1, "unreadable": 2}


def test_csv_one_row_per_activated_expert(tmp_path):
    src = tmp_path / "long.csv"
    src.write_text("layer,step,expert,weight\n"
                   "0,0,5,0.5\n0,0,2,0.3\n1,0,7,0.9\n1,0,1,0.1\n"
                   "0,1,2,0.5\n0,1,6,0.5\n"
                   "0,0,1,0.5\n0,0,3,0.5\n")  # step goes back: a new sequence
    trace = import_trace("csv", src, num_experts=8)
    assert trace.experts.tolist() == [[[5, 2], [7, 1]], [[2, 6], [-1, -1]],
                                      [[1, 3], [-1, -1]]]
    assert problems(trace) == {"restart": 1, "missing_layer": 2}
    assert trace.sequence_starts == [0, 2]


def test_csv_without_the_needed_columns_says_which(tmp_path):
    src = tmp_path / "bad.csv"
    src.write_text("layer,expert\n0,1\n")
    with pytest.raises(TraceError, match="needs a header with layer, token, and experts"):
        import_trace("csv", src)


def test_nothing_to_import_and_unknown_format(tmp_path):
    src = tmp_path / "empty.jsonl"
    src.write_text("\n")
    with pytest.raises(TraceError, match="no routings found"):
        import_trace("jsonl", src)
    with pytest.raises(TraceError, match="expected one of jsonl, vllm, csv"):
        import_trace("parquet", src)
    with pytest.raises(TraceError, match="no such file"):
        import_trace("csv", tmp_path / "missing.csv")
