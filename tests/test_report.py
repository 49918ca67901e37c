"""The execution report: every notebook's latest execution, the build's facts, and the CI run when there is one.
(The report of a real smoke build is checked in test_book.py.)"""

from __future__ import annotations

import json

from lmcbook import book
from lmcbook.book import Outcome
from lmcbook.page import record_path
from lmcbook.studies import all_notebooks

CI_VARS = ("GITHUB_SHA", "GITHUB_RUN_ID", "GITHUB_SERVER_URL", "GITHUB_REPOSITORY")


def _rows(md: str) -> dict[str, list[str]]:
    out = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 6:
            out[cells[0]] = cells[1:]
    return out


def test_the_report_keeps_each_notebooks_latest_execution(tmp_path, monkeypatch):
    for k in CI_VARS:
        monkeypatch.delenv(k, raising=False)
    record_path(tmp_path, "width_accuracy").parent.mkdir(parents=True)
    record_path(tmp_path, "width_accuracy").write_text(json.dumps({"code_version": "cv-test"}))
    params = {"width_accuracy": {}, "overview": {}}
    book.write_report(tmp_path, [Outcome("width_accuracy", True, 12.34, loaded=4, trained=2),
                                 Outcome("overview", False, 1.0, error="cell 3: boom")], "smoke", params)
    rows = _rows((tmp_path / book.REPORT_PAGE).read_text())
    wa, ov = "{doc}`width_accuracy <width_accuracy>`", "{doc}`overview <overview>`"
    assert rows[wa] == ["executed", "12.3", "4", "2", "cv-test"]
    assert rows[ov] == ["failed", "1.0", "0", "0", "–"]  # no earlier output was kept, so no code version
    assert rows["**total**"][:4] == ["1 executed, 0 cached, 1 failed", "13.3", "4", "2"]
    assert len([r for r in rows if r not in ("notebook", "---", "**total**")]) == len(all_notebooks())
    assert rows["claims"][0] == "not executed"  # no execution has included it yet
    assert "- `overview`: cell 3: boom" in (tmp_path / book.REPORT_PAGE).read_text()
    # a later execution that finds width_accuracy cached keeps overview's failure and the code version
    book.write_report(tmp_path, [Outcome("width_accuracy", True, 0.0, cached=True)], "smoke", params)
    rep = json.loads((tmp_path / book.REPORT_JSON).read_text())
    assert rep["notebooks"]["width_accuracy"] == {"status": "cached", "seconds": 0.0, "loaded": 0, "trained": 0,
                                                  "code_version": "cv-test", "error": "", "profile": "smoke",
                                                  "dataset": "digits"}
    assert rep["notebooks"]["overview"]["status"] == "failed"
    assert rep["build"]["profile"] == "smoke" and rep["build"]["datasets"] == ["digits"]
    assert rep["build"]["ci"] is None
    line = (tmp_path / book.BUILD_LINE).read_text()
    assert "profile `smoke`" in line and "CI run" not in line and "{doc}`execution report <report>`" in line
    assert "## Reference runs" in (tmp_path / book.REPORT_PAGE).read_text()
    assert "Mixed profiles" not in (tmp_path / book.REPORT_PAGE).read_text()
    book.write_report(tmp_path, [Outcome("claims", True, 2.0)], "quick", {"claims": {}})  # another profile
    assert "**Mixed profiles.** These pages come from executions at different profiles: `quick`: claims; " \
           "`smoke`: width_accuracy." in (tmp_path / book.REPORT_PAGE).read_text()
    assert "profiles `quick`, `smoke` (mixed)" in (tmp_path / book.BUILD_LINE).read_text()


def test_the_report_and_the_landing_line_link_the_ci_run_only_when_one_builds(tmp_path, monkeypatch):
    for k in CI_VARS:
        monkeypatch.delenv(k, raising=False)
    assert book.ci_run() is None
    monkeypatch.setenv("GITHUB_SHA", "abc123")
    assert book.ci_run() is None  # all three are needed
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "owner/lmcbook")
    url = "https://github.com/owner/lmcbook/actions/runs/42"
    assert book.ci_run() == {"sha": "abc123", "run_id": "42", "url": url}
    book.write_report(tmp_path, [], "quick", {})
    assert f"[CI run 42]({url})" in (tmp_path / book.BUILD_LINE).read_text()
    assert f"[run 42]({url}), commit `abc123`" in (tmp_path / book.REPORT_PAGE).read_text()
