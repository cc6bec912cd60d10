"""``Explanation._repr_html_``: what Jupyter shows, rendered and read back (the table's cells, the inline
SVG of the fused DAG where Graphviz is installed, the note where it is not)."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pytest

import fusec
from fusec.inspect import html as explain_html


def centered_rows(x):
    return (x - x.mean(axis=0)).sum(axis=1)  # a cols kernel, then a rows kernel reading what it wrote


class Page(HTMLParser):
    """The table's rows (cells as text), the tags seen, and the text of <pre>."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.tags: list[str] = []
        self.pre = ""
        self._cell: list[str] | None = None
        self._in_pre = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "pre":
            self._in_pre = True

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None
        elif tag == "pre":
            self._in_pre = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._in_pre:
            self.pre += data


def render(e: fusec.inspect.explain.Explanation) -> tuple[str, Page]:
    page = Page()
    text = e._repr_html_()
    page.feed(text)
    page.close()
    return text, page


def test_explain_html_table_has_one_row_per_kernel_with_its_bytes_and_schedule(monkeypatch) -> None:
    monkeypatch.setattr(explain_html.shutil, "which", lambda name: None)  # no Graphviz: the note instead
    f = fusec.fuse(centered_rows)
    spec = fusec.ArraySpec((64, 128), "float32")
    e = f.explain(spec)
    text, page = render(e)
    assert page.rows[0] == ["kernel", "kind", "nodes", "reads", "writes", "schedule"]
    body = page.rows[1:]
    assert [r[0] for r in body] == [k.name for k in e.kernels] and len(body) == 2
    assert body[0][1] == "cols over [64, 128]" and body[1][1] == "rows over [64, 128]"
    assert body[1][4] == "256 B"  # 64 float32 sums
    assert [r[5] for r in body] == [e._schedule_text(i) for i in range(2)]
    assert page.pre == e.render(color=False), "the whole report, unescaped back to the text"
    assert "Install Graphviz" in text and "<svg" not in text
    np.testing.assert_allclose(f(np.arange(12.0).reshape(3, 4)), centered_rows(np.arange(12.0).reshape(3, 4)))


def test_explain_html_escapes_names(monkeypatch) -> None:
    monkeypatch.setattr(explain_html.shutil, "which", lambda name: None)
    f = fusec.fuse(lambda x: x * 2, name="<b>bold</b>")
    text, page = render(f.explain(fusec.ArraySpec((4,), "float32")))
    assert "<b>" not in text and "&lt;b&gt;bold&lt;/b&gt;" in text and "b" not in page.tags


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not found: install graphviz to draw the DAG")
def test_explain_html_embeds_the_dag_as_svg_with_a_cluster_per_kernel() -> None:
    e = fusec.fuse(centered_rows).explain(fusec.ArraySpec((64, 128), "float32"))
    text, page = render(e)
    svg = text[text.index("<svg"):text.index("</svg>") + len("</svg>")]
    root = ET.fromstring(svg)
    groups = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "cluster"]
    assert len(groups) == len(e.plan.kernels) == 2
    assert "Install Graphviz" not in text and len(page.rows) == 3
