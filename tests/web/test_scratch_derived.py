"""Scratch: the throwaway derived `evictions_per_token` reaches every surface."""
import httpx

from tests.web.test_dashboard import layer_html
from tuner.format import columns_of
from tuner.vocabulary.snapshot import LayerRow


def test_formula_types_rest_metrics_page(live):
    assert "evictions_per_token" in LayerRow.__annotations__
    live.wait_tokens(5)
    snap = httpx.get(f"{live.url}/api/snapshot").json()
    for row in snap["layers"]:  # the formula, on each layer row of the snapshot
        tokens = snap["totals"]["tokens"]
        assert row["evictions_per_token"] == round(row["evictions"] / tokens, 3)
    assert any(row["evictions"] for row in snap["layers"])  # a 16-slot arena evicts
    metrics = httpx.get(f"{live.url}/metrics").text
    assert '# TYPE tuner_layer_evictions_per_token gauge' in metrics
    assert "evictions_per_token" in [c.name for c in columns_of("experts/token")]
    assert '<th data-col="evictions_per_token"' in layer_html(snap["layers"], "experts/token")
