"""MkDocs hooks (mkdocs.yml): the site's pages that live outside ``docs/``.

The README is the site's home page, and the benchmark results (``benchmarks/*.md``) are pages of
it, so that each file is written once and reads right both on the repository and on the site. Their
links are written for the repository (the README links ``docs/x.md``, a page links
``../benchmarks/RESULTS.md`` and ``../README.md``); here they are rewritten to the site's paths.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = {"index.md": "README.md", "benchmarks/RESULTS.md": "benchmarks/RESULTS.md",
           "benchmarks/loop.md": "benchmarks/loop.md"}


def on_files(files: Files, config) -> Files:
    for uri, source in OUTSIDE.items():
        files.append(File.generated(config, uri, abs_src_path=str(ROOT / source)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    uri = page.file.src_uri
    if uri == "index.md":  # the README: its links are relative to the repository's top
        markdown = re.sub(r"\]\(docs/", "](", markdown)
        markdown = re.sub(r"\]\(benchmarks/", "](benchmarks/", markdown)
    elif uri.startswith("benchmarks/"):  # links from benchmarks/ to the README or the pages
        markdown = re.sub(r"\]\(\.\./README\.md", "](../index.md", markdown)
        markdown = re.sub(r"\]\(\.\./docs/", "](../", markdown)
    else:  # a page under docs/
        markdown = re.sub(r"\]\(\.\./benchmarks/", "](benchmarks/", markdown)
        markdown = re.sub(r"\]\(\.\./README\.md", "](index.md", markdown)
    return markdown
