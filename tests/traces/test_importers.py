"""Importers on route logs in the shapes they are published in (fixtures/), and on small
hand-written ones with odd rows: every odd row is counted and shown, never silently
dropped."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from tuner.traces.importers import WARMUP_ROWS, ImportFailed, Options, import_trace, phases
from tuner.vocabulary.trace_format import TraceError

FIXTURES = Path(__file__).parent / "fixtures"


def lines(*rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def problems(trace) -> dict[str, int]:
    return {kind: p["count"] for kind, p in trace.meta["import_problems"].items()}


# -- JSON lines, one routing per line ------------------------------------------------------

@pytest.mark.parametrize("src", [[FIXTURES / "jsonl"], [FIXTURES / "jsonl" / "*.jsonl"],
                                 [FIXTURES / "jsonl" / "gsm8k.jsonl",
                                  FIXTURES / "jsonl" / "humaneval.jsonl"]])
def test_jsonl_as_published_sequences_from_dataset_and_problem_id(src):
    trace = import_trace("jsonl", src, model="mine", expert_bytes=100)
    # gsm8k problem 0 (2 tokens), problem 1 (its last token has layer 0 only: trimmed),
    # then humaneval problem 0, whose lines come layer 1 first
    assert trace.experts.tolist() == [[[7, 0], [3, 5]], [[7, 1], [3, 4]], [[2, 6], [5, 0]],
                                      [[4, 3], [1, 2]]]
    assert trace.sequence_starts == [0, 2, 3]
    assert np.allclose(trace.probs[:, 0], [[0.8, 0.2], [0.7, 0.3], [0.9, 0.1], [0.85, 0.15]])
    assert problems(trace) == {"trimmed": 1}
    assert trace.meta["import_problems"]["trimmed"]["examples"] == [
        "gsm8k.jsonl:7: token 1 routed at 1 of 2 layers"]
    assert trace.meta["import_notes"] == ["sequences from the 'problem_id' field (9 rows)"]
    assert (trace.meta["model"], trace.expert_bytes, trace.num_experts) == ("mine", 100, 8)
    assert trace.meta["num_experts_inferred"] is True


def test_jsonl_other_keys_are_reported_until_named(tmp_path):
    src = tmp_path / "routes.jsonl"
    src.write_text(lines(*({"conv": c, "layer": 0, "token_idx": t, "experts": [c, t + 2],
                            "scores": [0.6, 0.4], "note": "x"}
                           for c in (0, 1) for t in range(2))))
    plain = import_trace("jsonl", src)
    assert plain.probs is None and plain.sequence_starts == [0, 2]  # token_idx went back
    assert plain.meta["import_problems"]["ignored_field"]["examples"] == [
        "routes.jsonl:1: 'conv'", "routes.jsonl:1: 'scores'", "routes.jsonl:1: 'note'"]
    named = import_trace("jsonl", src, Options(sequence_key="conv", probs_key="scores"))
    assert np.allclose(named.probs, [[[0.6, 0.4]]] * 4) and named.sequence_starts == [0, 2]
    assert named.meta["import_problems"]["ignored_field"]["examples"] == [
        "routes.jsonl:1: 'note'"]


def test_jsonl_odd_rows_are_reported(tmp_path):
    src = tmp_path / "odd.jsonl"
    src.write_text(lines(
        {"layer": 0, "token_idx": 0, "experts": [1, 2]},
        {"layer": 1, "token_idx": 0, "experts": [3, 4]},
        "{not json",
        {"layer": 0, "token_idx": 1, "experts": [5, 5]},  # duplicate id
        {"layer": 1, "token_idx": 1, "experts": [9, 2]},  # 9 >= num_experts 8
        {"layer": 0, "token_idx": 2, "experts": [-3, 2, 1]},  # negative id, k 3
        {"layer": 1, "token_idx": 3, "experts": [0, 2, 1]},  # no layer 0 at token 3
        {"layer": 0, "token_idx": 2, "probs": [1.0]},  # no experts
        {"layer": 1, "token_idx": 0, "experts": [6, 7], "probs": [1.0]},  # restart; bad probs
        "",
        {"layer": 0, "token_idx": 0, "experts": [0, 1]},  # restart at layer 0 too
    ))
    trace = import_trace("jsonl", src, Options(num_experts=8))
    assert problems(trace) == {"unreadable": 2, "duplicate_id": 1, "out_of_range": 1,
                               "negative_id": 1, "wrong_k": 1, "restart": 2,
                               "missing_layer": 1, "probs_mismatch": 1, "trimmed": 1}
    # tokens: (seq 0, 0), (seq 0, 1), (seq 0, 2), (seq 1, 0); k = the widest routing, 3;
    # sequence 0's last token, 3, routed at layer 1 only: trimmed
    assert trace.experts.tolist() == [
        [[1, 2, -1], [3, 4, -1]],
        [[5, -1, -1], [-1, 2, -1]],
        [[-1, 2, 1], [-1, -1, -1]],  # layer 1 has no routing at token 2
        [[0, 1, -1], [6, 7, -1]],
    ]
    assert trace.sequence_starts == [0, 3] and trace.probs is None
    report = trace.meta["import_problems"]
    assert report["missing_layer"]["examples"] == ["sequence 0 token 2: no routing for layer 1"]
    assert report["trimmed"]["examples"] == ["odd.jsonl:7: token 3 routed at 1 of 2 layers"]
    assert report["unreadable"]["examples"][0].startswith("odd.jsonl:3: not JSON")
    assert "no 'experts'" in report["unreadable"]["examples"][1]
    assert report["out_of_range"]["examples"] == ["odd.jsonl:5: expert 9 >= 8"]


def test_jsonl_probabilities_a_trace_cannot_hold_are_dropped_and_reported(tmp_path):
    src = tmp_path / "wild.jsonl"
    src.write_text(lines(
        {"layer": 0, "token_idx": 0, "experts": [1, 2], "probs": [0.7, 0.3]},
        {"layer": 0, "token_idx": 1, "experts": [1, 2], "probs": [1e300, 0.1]},
        {"layer": 0, "token_idx": 2, "experts": [1, 2], "probs": [-1e39, 0.1]},
    ))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in a cast to float32
        trace = import_trace("jsonl", src, Options(num_experts=8))
    assert problems(trace) == {"probs_not_finite": 2}
    assert trace.meta["import_problems"]["probs_not_finite"]["examples"][0] == \
        "wild.jsonl:2: [1e+300, 0.1]"
    assert np.allclose(trace.probs[0], [[0.7, 0.3]]) and np.isnan(trace.probs[1:]).all()


def test_jsonl_a_routing_named_twice_is_reported(tmp_path):
    src = tmp_path / "twice.jsonl"
    row = {"req_id": "r", "layer": 0, "token_idx": 0, "experts": [1, 2]}
    src.write_text(lines(row, {**row, "experts": [3, 4]}))
    trace = import_trace("jsonl", src)
    assert trace.experts.tolist() == [[[1, 2]]]
    assert trace.meta["import_problems"]["duplicate_routing"]["examples"] == [
        "twice.jsonl:2: token 0, layer 0"]


# -- CSV, one file per prompt --------------------------------------------------------------

@pytest.mark.parametrize("src", [FIXTURES / "csv", FIXTURES / "csv" / "prompt_*.csv"])
def test_csv_one_file_per_prompt_as_published(src):
    trace = import_trace("csv", [src])
    # prompt_0: "The cat sat", prompt_1: "42 !", layer ids 1 and 2, rows layer-major
    assert trace.experts.tolist() == [
        [[8, 26, 56, 57, 60, 11], [1, 2, 3, 4, 5, 6]],
        [[8, 26, 3, 57, 60, 12], [1, 2, 3, 4, 5, 7]],
        [[40, 26, 3, 57, 9, 12], [63, 2, 3, 4, 5, 7]],
        [[0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15]],
        [[0, 1, 2, 3, 4, 6], [10, 11, 12, 13, 14, 16]],
    ]
    assert trace.sequence_starts == [0, 3] and trace.meta["layer_ids"] == [1, 2]
    assert problems(trace) == {"ignored_field": 1}
    assert trace.meta["import_problems"]["ignored_field"]["examples"] == [
        "prompt_0.csv:1: 'Batch Number'"]
    assert trace.meta["import_notes"] == [
        "2 of 2 file(s) hold token text, not indices: positions from row order, per layer"]


def test_csv_one_row_per_routing(tmp_path):
    src = tmp_path / "r.csv"
    src.write_text("Layer,Token_idx,experts\n"
                   '0,0,"[4, 1, 2]"\n'
                   "1,0,3;0;1\n"
                   "0,1,1 2 3\n"
                   "1,1,2|0\n"  # k 2
                   "1,x,1 2 3\n"  # a text token in a file of indices: unreadable
                   "0\n")  # short row
    trace = import_trace("csv", src)
    assert trace.experts.tolist() == [[[4, 1, 2], [3, 0, 1]], [[1, 2, 3], [2, 0, -1]]]
    assert problems(trace) == {"wrong_k": 1, "unreadable": 2}
    assert trace.meta["import_problems"]["unreadable"]["examples"][0].startswith("r.csv:6: ")


def test_csv_one_row_per_activated_expert(tmp_path):
    src = tmp_path / "long.csv"
    src.write_text("layer,step,expert,weight\n"
                   "0,0,5,0.5\n0,0,2,0.3\n1,0,7,0.9\n1,0,1,0.1\n"
                   "0,1,2,0.5\n0,1,6,0.5\n1,1,3,1.0\n1,1,4,0.0\n"
                   "0,0,1,0.5\n0,0,3,0.5\n1,0,2,0.5\n1,0,0,0.5\n")  # step goes back
    trace = import_trace("csv", src, Options(num_experts=8))
    assert trace.experts.tolist() == [[[5, 2], [7, 1]], [[2, 6], [3, 4]], [[1, 3], [2, 0]]]
    assert problems(trace) == {"restart": 2, "ignored_field": 1}
    assert trace.sequence_starts == [0, 2]


def test_csv_without_the_needed_columns_names_the_file(tmp_path):
    src = tmp_path / "bad.csv"
    src.write_text("layer,expert\n0,1\n")
    with pytest.raises(TraceError, match=r"bad.csv: columns \['layer', 'expert'\]; a routing "
                       "CSV needs a header with layer, token, and experts"):
        import_trace("csv", src)


# -- vLLM's MoE route logger ---------------------------------------------------------------

def test_vllm_decode_phase_one_sequence_per_request():
    trace = import_trace("vllm", [FIXTURES / "vllm"])
    # decode steps 0-3 hold requests 0 and 1, step 4 request 0 only; experts (n, n + 8) at
    # layer 0 and (n + 1, n + 9) at layer 1 for the n-th route line of the file
    request0 = [[[n % 16, (n + 8) % 16], [(n + 1) % 16, (n + 9) % 16]] for n in (20, 22, 24, 26,
                                                                                 28)]
    request1 = [[[n % 16, (n + 8) % 16], [(n + 1) % 16, (n + 9) % 16]] for n in (21, 23, 25, 27)]
    assert trace.experts.tolist() == request0 + request1
    assert trace.sequence_starts == [0, 5]
    assert trace.num_experts == 16 and "num_experts_inferred" not in trace.meta
    assert trace.meta["model"] == "allenai/OLMoE-1B-7B-0924"
    assert np.allclose(trace.probs, 0.75 * (np.arange(2) == 0) + 0.25 * (np.arange(2) == 1))
    assert problems(trace) == {"warmup": 30, "other_phase": 10}
    report = trace.meta["import_problems"]
    assert report["warmup"]["examples"][0] == "moe_layer0.jsonl:2: warm-up batch 0, 8 rows"
    assert report["other_phase"]["examples"][0] == "moe_layer0.jsonl:17: prefill batch 4, 5 rows"
    assert trace.meta["import_notes"] == [
        "10 forward batches (token_idx restarts): 4 warm-up (3 of them dummy runs, every row "
        "routed alike), 1 round(s) of requests, decode batches of up to 2 rows",
        "round 0: a prefill of 5 rows, 5 decode steps of 2 requests",
        "round 0: decode batch size 2 -> 1 at decode step 4: from there row i is taken as "
        "request i (the log does not say which request ended)"]


def test_vllm_prefill_and_all_phases_and_one_file():
    prefill = import_trace("vllm", [FIXTURES / "vllm"], Options(phase="prefill"))
    assert prefill.experts[:, 0, 0].tolist() == [15, 0, 1, 2, 3]  # route lines 15-19
    assert prefill.sequence_starts == [0] and problems(prefill) == {"warmup": 30,
                                                                    "other_phase": 18}
    assert "one sequence" in prefill.meta["import_notes"][-1]
    both = import_trace("vllm", [FIXTURES / "vllm"], Options(phase="all"))
    assert both.sequence_starts == [0, 5, 10] and both.tokens == 14
    one = import_trace("vllm", [FIXTURES / "vllm" / "moe_layer1.jsonl"])
    assert one.layers == 1 and one.meta["layer_ids"] == [1] and one.tokens == 9


def route(req, idx, ids, layer=0):
    return {"type": "route", "req_id": req, "token_idx": idx, "layer": layer, "topk_ids": ids}


def batch(req, *rows, layer=0):
    """One forward batch: token_idx restarts at 0."""
    return [route(req, i, ids, layer) for i, ids in enumerate(rows)]


def test_vllm_dummy_warm_up_and_prompts_run_one_at_a_time(tmp_path):
    """A profiling run of dummy tokens (every row alike), then two prompts generated one
    after the other: each its own prefill and decode steps of one row. Every decode step
    of this logger has a req_id of its own, which must not split the request."""
    (tmp_path / "moe_layer0.jsonl").write_text(lines(
        *batch("r0", [1, 2], [1, 2], [1, 2], [1, 2]),  # dummy run
        *batch("r1", [3, 4], [5, 6], [7, 8]),  # prompt A
        *batch("r2", [9, 10]), *batch("r3", [11, 12]), *batch("r4", [13, 14]),
        *batch("r5", [0, 1], [2, 3]),  # prompt B
        *batch("r6", [4, 5]), *batch("r7", [6, 7])))
    trace = import_trace("vllm", tmp_path)
    assert trace.experts[:, 0].tolist() == [[9, 10], [11, 12], [13, 14], [4, 5], [6, 7]]
    assert trace.sequence_starts == [0, 3]
    assert problems(trace) == {"warmup": 4, "other_phase": 5}
    assert trace.meta["import_notes"][1:] == [
        "round 0: a prefill of 3 rows, 3 decode steps of 1 requests",
        "round 1: a prefill of 2 rows, 2 decode steps of 1 requests"]
    both = import_trace("vllm", tmp_path, Options(phase="all"))
    assert both.sequence_starts == [0, 3, 6, 8] and both.tokens == 10


def test_vllm_batched_requests_keep_their_order_across_layers(tmp_path):
    """Three requests decoded together, at two layers: each request's tokens in order, one
    sequence each; the dummy run and the prefill are left out."""
    for layer in (0, 1):
        (tmp_path / f"moe_layer{layer}.jsonl").write_text(lines(
            *batch("r", [0, 1], [0, 1], [0, 1], layer=layer),
            *batch("r", *([[2, 3]] * 2 + [[4, 5]] * 3), layer=layer),
            *[row for step in range(4) for row in batch(
                "r", [step, 20 + layer], [step + 4, 20 + layer], [step + 8, 20 + layer],
                layer=layer)]))
    trace = import_trace("vllm", tmp_path)
    assert trace.sequence_starts == [0, 4, 8]
    assert trace.experts[:4, 0, 0].tolist() == [0, 1, 2, 3]  # request 0, steps in order
    assert trace.experts[4:8, 1].tolist() == [[4, 21], [5, 21], [6, 21], [7, 21]]
    assert problems(trace) == {"warmup": 6, "other_phase": 10}


def test_vllm_log_whose_token_idx_never_restarts_is_one_sequence(tmp_path):
    (tmp_path / "moe_layer0.jsonl").write_text(lines(
        *(route("r", i, [i % 4, 4 + i % 3]) for i in range(6))))
    trace = import_trace("vllm", tmp_path)
    assert trace.tokens == 6 and trace.sequence_starts == [0]
    assert "cannot be told apart" in trace.meta["import_notes"][0]


def test_vllm_dummy_warm_up_at_the_start_of_a_log_that_never_restarts(tmp_path):
    """vLLM's dummy run comes first, its rows routed alike at every layer (as OLMoE's
    public log has 2,048 of them): dropped with a note and a line in the report. A shorter
    run of alike rows is a prompt that repeats a token, and stays."""
    def log(alike: int) -> Path:
        folder = tmp_path / f"alike{alike}"
        folder.mkdir()
        for layer in (0, 1):
            rows = [[7, 3]] * alike + [[i % 8, 8 + i % 5] for i in range(10)]
            (folder / f"moe_layer{layer}.jsonl").write_text(lines(
                *(route("r0", i, [e + layer for e in ids], layer)
                  for i, ids in enumerate(rows))))
        return folder

    trace = import_trace("vllm", log(WARMUP_ROWS))
    assert trace.tokens == 10 and trace.experts[0].tolist() == [[0, 8], [1, 9]]
    assert problems(trace) == {"warmup": 2 * WARMUP_ROWS}
    assert trace.meta["import_notes"][1] == (
        f"its first {WARMUP_ROWS} rows route exactly alike at every layer: vLLM's dummy "
        "warm-up run, dropped")
    kept = import_trace("vllm", log(WARMUP_ROWS - 1))
    assert kept.tokens == WARMUP_ROWS - 1 + 10 and problems(kept) == {}


def test_vllm_requests_by_req_id_when_the_ids_tell_them_apart(tmp_path):
    # a prefill of 3, then decode steps of two requests whose rows swap places
    (tmp_path / "moe_layer0.jsonl").write_text(lines(
        route("a", 0, [0]), route("a", 1, [1]), route("b", 2, [2]),
        route("a", 0, [3]), route("b", 1, [4]), route("b", 0, [5]), route("a", 1, [6])))
    trace = import_trace("vllm", tmp_path)
    assert trace.experts[:, 0, 0].tolist() == [3, 6, 4, 5]  # request a, then request b


@pytest.mark.parametrize("sizes, dummy, expected", [
    # dummy warm-up (8, 4, 2; the capture of 1 row cannot be told by content), prefill, decode
    ([8, 4, 2, 1, 5, 2, 2, 2, 2, 1], [1, 1, 1, 0, 0, 0, 0, 0, 0, 0], (2, [(4, 5, 10)])),
    ([1, 2, 4, 8, 300, 4, 4, 4, 3], None, (4, [(4, 5, 9)])),  # warm-up before the prefill
    ([4, 4, 4], None, (4, [(None, 0, 3)])),  # a decode-only log
    ([9, 3, 1, 1, 1, 4, 1, 1], [1, 0, 0, 0, 0, 0, 0, 0], (1, [(1, 2, 5), (5, 6, 8)])),
])
def test_phases_from_batch_sizes(sizes, dummy, expected):
    B, rounds = phases(sizes, [bool(d) for d in dummy] if dummy else None)
    assert (B, [(r.prefill, r.decode.start, r.decode.stop) for r in rounds]) == expected


# -- errors ------------------------------------------------------------------------------

def test_a_failed_import_keeps_its_report(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text(lines({"layer": 0, "experts": [1]}, "[1, 2]"))
    with pytest.raises(ImportFailed, match="no routings found") as caught:
        import_trace("jsonl", src)
    assert caught.value.report["unreadable"]["examples"] == [
        "bad.jsonl:1: no 'token_idx'; a row has layer, token_idx and experts",
        "bad.jsonl:2: a JSON object is expected"]


def test_nothing_to_import_and_unknown_names(tmp_path):
    src = tmp_path / "empty.jsonl"
    src.write_text("\n")
    with pytest.raises(TraceError, match="no routings found"):
        import_trace("jsonl", src)
    with pytest.raises(TraceError, match="expected one of jsonl, csv, vllm"):
        import_trace("parquet", src)
    with pytest.raises(TraceError, match="no such file or folder, and no file matches it"):
        import_trace("csv", tmp_path / "missing*.csv")
    with pytest.raises(TraceError, match="no .csv files in the folder"):
        import_trace("csv", tmp_path)
    with pytest.raises(TraceError, match="phase 'warmup': expected one of decode, prefill"):
        import_trace("vllm", tmp_path, Options(phase="warmup"))
