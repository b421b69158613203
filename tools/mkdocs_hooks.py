"""MkDocs hooks of the documentation site (mkdocs.yml): every "seed 000" to "seed 003"
outside code links to that seed's summary, so a reader of any page, generated ones
included, can look up what the seed found."""

from __future__ import annotations

import posixpath
import re

SEEDS_PAGE = "background/seeds.md"
MENTION = re.compile(r"(?<![\[\w-])([Ss]eeds?) (\d{3})((?:(?:, | and )\d{3})*)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _link(page: str, number: str, text: str) -> str:
    target = posixpath.relpath(SEEDS_PAGE, posixpath.dirname(page) or ".")
    return f"[{text}]({target}#seed-{number})"


def link_seeds(markdown: str, page: str) -> str:
    """`markdown` with each seed mention outside code (fenced or inline) and outside
    headings made a link; "seeds 002, 003" links each number."""

    def mention(m: re.Match) -> str:
        word, first, rest = m.group(1), m.group(2), m.group(3)
        out = _link(page, first, f"{word} {first}")
        for sep, number in re.findall(r"(, | and )(\d{3})", rest):
            out += sep + _link(page, number, number)
        return out

    lines, fenced = [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        if fenced or FENCE.match(line) or line.lstrip().startswith("#"):
            lines.append(line)
            continue
        parts = line.split("`")  # odd parts are inline code
        lines.append("`".join(p if i % 2 else MENTION.sub(mention, p)
                              for i, p in enumerate(parts)))
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return link_seeds(markdown, page.file.src_uri)
