"""One document model for everything compare/ writes: blocks (headings, paragraphs, tables, images, code,
bullets) rendered to Markdown, to a self-contained HTML page, or to an aligned terminal table, and the
number formatting they all share. The report, matrix, faults, bench and soak summaries are lists of blocks.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path

DASH = "—"


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str  # may hold **bold** and `code`


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Image:
    alt: str
    file: str  # relative to the report's directory


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Card:
    """A verdict at a glance: its outcome as a badge, its sentences, and beside them the figures that show it
    (a plot, a small table). Markdown gives the same blocks one after the other."""
    outcome: str  # a key for the badge's colour: holds, fails, undecided, different jobs
    badge: str
    blocks: list[Block]
    aside: list[Block]


@dataclass(frozen=True)
class Fold:
    """Everything after it is detail: folded under `title` in HTML (<details>), a rule in Markdown."""
    title: str


Block = Heading | Para | Table | Image | Code | Bullets | Card | Fold


# ---- number formatting ----------------------------------------------------------------------------------


def num(value: float | None, spec: str = ".3g") -> str:
    return DASH if value is None else format(value, spec)


def ms(seconds: float | None) -> str:
    return DASH if seconds is None else f"{seconds * 1e3:.2f}"


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    """An aligned plain-text table, for a terminal."""
    table = [headers, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    # Names left-aligned, numbers right-aligned.
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---- rendering ------------------------------------------------------------------------------------------


def md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Card):
            out.append(render_markdown([*block.blocks, *block.aside]).rstrip("\n") + "\n")
            continue
        if isinstance(block, Fold):
            out.append("---")
        elif isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Para):
            out.append(block.text)
        elif isinstance(block, Table):
            out.append("| " + " | ".join(md_cell(h) for h in block.headers) + " |")
            out.append("|" + "---|" * len(block.headers))
            out.extend("| " + " | ".join(md_cell(c) for c in row) + " |" for row in block.rows)
        elif isinstance(block, Image):
            out.append(f"![{block.alt}]({block.file})")
        elif isinstance(block, Code):
            out.append(f"```\n{block.text}\n```")
        elif isinstance(block, Bullets):
            out.extend(f"- {item}" for item in block.items)
        out.append("")
    return "\n".join(out)


def inline_html(text: str) -> str:
    escaped = html.escape(text)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", escaped)


CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f2f2f2; }
td:first-child, th:first-child { text-align: left; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
.card { display: flex; flex-wrap: wrap; gap: 1.5em; border: 2px solid #999; border-radius: 8px; padding: 1em 1.5em;
        margin: 1em 0 1.5em; }
.card .text { flex: 1 1 480px; } .card .aside { flex: 1 1 420px; } .card h1 { margin-top: 0.2em; }
.badge { display: inline-block; padding: 0.3em 0.9em; border-radius: 1em; color: #fff; font-weight: bold;
         font-size: 1.3em; background: #777; }
.card-holds { border-color: #2e7d32; } .card-holds .badge { background: #2e7d32; }
.card-fails { border-color: #c62828; } .card-fails .badge { background: #c62828; }
.card-undecided { border-color: #ef8f00; } .card-undecided .badge { background: #ef8f00; }
details > summary { font-size: 1.3em; font-weight: bold; cursor: pointer; margin: 1em 0; }
"""


def render_html(blocks: list[Block], image_dir: Path) -> str:
    """A self-contained page: images are embedded as base64 data URIs."""
    flat = [inner for b in blocks for inner in (b.blocks if isinstance(b, Card) else [b])]
    title = next((b.text for b in flat if isinstance(b, Heading)), "Report")
    body = html_body(blocks, image_dir)
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def html_body(blocks: list[Block], image_dir: Path) -> list[str]:
    body: list[str] = []
    folded = False
    for block in blocks:
        if isinstance(block, Card):
            slug = block.outcome.replace(" ", "-")
            body.append(f'<section class="card card-{slug}"><div class="text">'
                        f'<span class="badge">{html.escape(block.badge)}</span>'
                        + "\n".join(html_body(block.blocks, image_dir)) + '</div><div class="aside">'
                        + "\n".join(html_body(block.aside, image_dir)) + "</div></section>")
        elif isinstance(block, Fold):
            body.append(("</details>" if folded else "") + f"<details><summary>{html.escape(block.title)}</summary>")
            folded = True
        elif isinstance(block, Heading):
            body.append(f"<h{block.level}>{inline_html(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            body.append(f"<p>{inline_html(block.text)}</p>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
            rows = "".join(
                "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in block.rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, Image):
            data = base64.b64encode((image_dir / block.file).read_bytes()).decode("ascii")
            body.append(f'<img alt="{html.escape(block.alt)}" src="data:image/png;base64,{data}">')
        elif isinstance(block, Code):
            body.append(f"<pre>{html.escape(block.text)}</pre>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in block.items) + "</ul>")
    if folded:
        body.append("</details>")
    return body
