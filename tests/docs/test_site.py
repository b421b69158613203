"""The documentation site: its reference pages are what their tables give, it builds with
`mkdocs build --strict` (a broken link, a missing picture or a page outside the nav fails),
and a seed mention anywhere links to the seed's summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuner import docs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from mkdocs_hooks import link_seeds  # noqa: E402


def test_the_reference_pages_are_current():
    assert docs.stale(ROOT) == [], "stale: run `python -m tuner.docs --write`"


def test_a_changed_table_makes_its_page_stale(tmp_path):
    docs.write(tmp_path)
    assert docs.stale(tmp_path) == []
    page = tmp_path / docs.REFERENCE / "knobs.md"
    page.write_text(page.read_text().replace("moce_bonus", "moce_bonus_old", 1))
    assert docs.stale(tmp_path) == ["knobs.md"]


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    seeds = (tmp_path / "site" / "background" / "seeds" / "index.html").read_text()
    assert all(f'id="seed-00{n}"' in seeds for n in range(4))
    engine = (tmp_path / "site" / "background" / "engine" / "index.html").read_text()
    assert 'href="../seeds/#seed-003"' in engine  # written "seed 003" in the page


def test_seed_mentions_become_links_outside_code():
    text = ("as seed 001 measured; seeds 002, 003 and 000 too\n`seed 002` stays\n"
            "```\nseed 003\n```\n## Seed 000 section\n[seed 001](x.md) already is one")
    out = link_seeds(text, "guide/ab.md").split("\n")
    assert out[0] == ("as [seed 001](../background/seeds.md#seed-001) measured; "
                      "[seeds 002](../background/seeds.md#seed-002), "
                      "[003](../background/seeds.md#seed-003) and "
                      "[000](../background/seeds.md#seed-000) too")
    assert out[1:] == text.split("\n")[1:]
    assert link_seeds("seed 000", "index.md") == "[seed 000](background/seeds.md#seed-000)"


def test_the_readme_leads_with_the_two_commands_ci_runs():
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.split("```sh\n", 1)[1].split("```")[0].splitlines()
                if line and not line.startswith("#")]
    assert commands[0] == "pip install torch==2.13.0 && pip install -e . && tuner serve"
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert commands[1] == ci  # the test command, verbatim
    assert len(readme.encode()) < 10_000
