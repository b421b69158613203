"""Scratch: the throwaway `pf_named` counter reaches every surface the recipe names."""
from dataclasses import replace

import httpx

from tuner.engine.session.session import Session
from tuner.format import columns_of
from tuner.vocabulary.snapshot import LayerRow, Totals
from tests.web.test_dashboard import layer_html


def test_the_engine_counts_it(tiny_config):
    for prefetch in ("stale", "off"):
        s = Session(replace(tiny_config, prefetch=prefetch, temperature=0.0))
        s.run(40)
        snap = s.snapshot()
        s.engine.close()
        decode = snap["phases"]["decode"]
        # stale names the top 4 of layers 1..3 on each decoded token; off names nothing
        named = decode["tokens"] * 3 * 4 if prefetch == "stale" else 0
        assert decode["pf_named"] == named and decode["pf_named"] >= decode["pf_issued"]
        assert snap["layers"][0]["pf_named"] == 0  # no layer before the first predicts it


def test_types_rest_metrics_page(live):
    assert "pf_named" in LayerRow.__annotations__ and "pf_named" in Totals.__annotations__
    live.wait_tokens(3)
    snap = httpx.get(f"{live.url}/api/snapshot").json()
    assert "pf_named" in snap["totals"] and "pf_named" in snap["layers"][1]
    metrics = httpx.get(f"{live.url}/metrics").text
    assert '# TYPE tuner_layer_pf_named_total counter' in metrics
    assert "pf_named" in [c.name for c in columns_of("experts")]
    assert '<th data-col="pf_named"' in layer_html(snap["layers"], "experts")
