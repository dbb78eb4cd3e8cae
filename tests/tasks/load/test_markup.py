"""Docs-site pages read as Markdown: MDX, reStructuredText, AsciiDoc and notebooks, with their titles and headings."""

from __future__ import annotations

import json
from pathlib import Path

from ctxrag.tasks.context.offline import StructuralContextualizer
from ctxrag.tasks.load.chunking import split_markdown
from ctxrag.tasks.load.directory import load_directory
from ctxrag.tasks.load.markup import as_markdown

MDX = """---
title: Rate limits
description: How many requests a key may send.
sidebar_position: 3
---
import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';
export const meta = {
  tags: ["limits"],
};

Every key has limits.

<Tabs groupId="tier">
  <TabItem value="one" label="Tier 1">
    Tier 1 allows **50** requests a minute.
  </TabItem>
</Tabs>

## Raising a limit

<Note type="info">Ask support.</Note>
<Card title="Billing" href="/billing" />

```jsx
import Tabs from '@theme/Tabs';
<Tabs><TabItem value="x">kept in code</TabItem></Tabs>
```
"""


def test_mdx_keeps_text_drops_imports_exports_and_component_tags() -> None:
    page = as_markdown(MDX, "mdx")
    prose, code = page.text.split("```jsx")
    assert page.description == "How many requests a key may send."
    assert prose.startswith("# Rate limits\n")  # the front matter's title, as the site renders it
    assert "import" not in prose and "export" not in prose and "tags:" not in prose and "sidebar_position" not in prose
    assert "<" not in prose and "Tier 1 allows **50** requests a minute." in prose and "Ask support." in prose
    assert "import Tabs from '@theme/Tabs';" in code and '<TabItem value="x">kept in code</TabItem>' in code
    headings = [piece.heading for piece in split_markdown(page.text, 400)]
    assert headings[0] == "Rate limits" and "Rate limits > Raising a limit" in headings


def test_markdown_without_front_matter_is_unchanged_and_a_title_heading_is_not_doubled() -> None:
    text = "# Guide\n\nSome text.\n"
    assert as_markdown(text, "md").text == text
    assert as_markdown("---\ntitle: Guide\n---\n# Guide\n\nSome text.\n", "md").text == "# Guide\n\nSome text.\n"
    assert (
        as_markdown("---\nnot: [closed\n---\nbody\n", "md").text == "---\nnot: [closed\n---\nbody\n"
    )  # bad YAML: text


def test_rst_section_titles_become_headings_in_the_order_their_styles_appear() -> None:
    rst = """=========
 Logging
=========

Intro text.

Handlers
--------

A handler sends records.

Rotating
~~~~~~~~

Files rotate.

Filters
-------

.. code-block:: python

   x = 1
"""
    headings = [piece.heading for piece in split_markdown(as_markdown(rst, "rst").text, 60)]
    assert headings == ["Logging", "Logging > Handlers", "Logging > Handlers > Rotating", "Logging > Filters"]


def test_asciidoc_and_notebooks_read_with_headings() -> None:
    assert as_markdown("= Title\n\n== Part\ntext\n", "adoc").text == "# Title\n\n## Part\ntext\n"
    notebook = {
        "metadata": {"language_info": {"name": "python"}},
        "cells": [
            {"cell_type": "markdown", "source": ["# Loading data\n", "Read the CSV."]},
            {
                "cell_type": "code",
                "source": "import pandas as pd\ndf = pd.read_csv('x.csv')",
                "outputs": [{"text": "OUTPUT"}],
            },
            {"cell_type": "markdown", "source": "## Cleaning"},
        ],
    }
    text = as_markdown(json.dumps(notebook), "ipynb").text
    assert (
        text
        == "# Loading data\nRead the CSV.\n\n```python\nimport pandas as pd\ndf = pd.read_csv('x.csv')\n```\n\n## Cleaning\n"
    )


def test_a_docs_page_context_names_its_page_title_section_and_description(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "limits.mdx").write_text(MDX)
    (tmp_path / "README.md").write_text("# Project\n\nHello.\n")
    corpus = load_directory(tmp_path, budget=400)
    page = next(document for document in corpus.documents if document.doc_id == "docs/limits.mdx")
    chunks = [chunk for chunk in corpus.chunks if chunk.doc_id == page.doc_id]
    contexts = StructuralContextualizer().contextualize(page, chunks)
    section = next(context for chunk, context in zip(chunks, contexts) if chunk.heading.endswith("Raising a limit"))
    assert "Page: docs/limits.mdx." in section and "Section: Rate limits > Raising a limit." in section
    assert "About: How many requests a key may send." in section
    readme = next(document for document in corpus.documents if document.doc_id == "README.md")
    assert readme.description == "" and readme.content == "# Project\n\nHello.\n"
