"""The sign-in page's preloader names the installed frontend's own module files, the
ones Streamlit's entry module imports lazily (so that the browser's module map shares
them), and only files that exist."""

from __future__ import annotations

import re
from pathlib import Path

from dashboard.components.preload import (
    FIRST_PAGE_ELEMENTS,
    OTHER_PAGE_ELEMENTS,
    STATIC_JS,
    chunk_files,
)


def test_chunk_files_finds_each_elements_file_once_and_skips_missing_ones(tmp_path: Path):
    for name in ("PlotlyChart.D9Z0_fxz.js", "PlotlyChartExtra.abc.js", "Metric.x1.js"):
        (tmp_path / name).write_text("export default 1")
    (tmp_path / "Metric.x1.js.map").write_text("{}")

    found = chunk_files(["PlotlyChart", "Metric", "Gone", "PlotlyChart"], tmp_path)

    assert found == ["PlotlyChart.D9Z0_fxz.js", "Metric.x1.js"]
    assert chunk_files([], tmp_path) == []


def test_the_installed_streamlit_has_every_first_page_module_and_imports_it_lazily():
    elements = FIRST_PAGE_ELEMENTS + OTHER_PAGE_ELEMENTS
    found = chunk_files(elements)
    # one file per element: a Streamlit upgrade that renames one fails here, not silently
    assert [f.split(".")[0] for f in found] == list(elements)
    (entry,) = [p for p in STATIC_JS.glob("index.*.js") if re.fullmatch(r"index\.\w+\.js", p.name)]
    # the entry module imports the elements lazily; Markdown's plugins its own chunk does
    importers = [entry, *STATIC_JS.glob("StreamlitMarkdown.*.js")]
    texts = [p.read_text() for p in importers]
    for file in found:
        # the same URL Streamlit's lazy import() resolves, next to its entry module
        assert any(f'"./{file}"' in text for text in texts), file
