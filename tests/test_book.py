"""Integration: execute every notebook at the smoke profile, validate its CSV, build the book, check it in a browser.

Each notebook is executed once per test session (the ``executed`` fixture); the
store and all outputs live in a temporary directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from lmcbook import book, reference
from lmcbook.schema import read_results
from lmcbook.store import RunStore
from lmcbook.studies import all_notebooks

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
#: The headless Chromium of the browser checks: LMCBOOK_CHROMIUM, else the Debian package, else Playwright's own
#: headless shell (``make browser`` installs one of them).
CHROMIUM = os.environ.get("LMCBOOK_CHROMIUM") or shutil.which("chromium-headless-shell")


def _launch(pw, *args: str):
    """Launch the headless Chromium (see :data:`CHROMIUM`); fail, not skip, if there is none."""
    try:
        return pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", *args])
    except Exception as e:  # no browser at all: the check must not pass silently
        pytest.fail(f"no headless Chromium ({e}); run `make browser`, or install the Debian package "
                    "chromium-headless-shell, or set LMCBOOK_CHROMIUM")


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    base = tmp_path_factory.mktemp("book")
    out, store = base / "generated", base / "store"
    saved = {k: os.environ.get(k) for k in ("LMCBOOK_STORE", "LMCBOOK_OUT")}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        outcomes = book.execute(None, "smoke", {}, out, ROOT / "notebooks", store)
    finally:
        os.chdir(cwd)
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return base, out, store, outcomes


@pytest.fixture(scope="session")
def built(executed):
    base, out, _, outcomes = executed
    assert all(o.ok for o in outcomes), [o.error for o in outcomes if not o.ok]
    index = book.build(ROOT, out, base / "build")
    return index.parent


def test_every_notebook_executes(executed):
    _, out, _, outcomes = executed
    assert [o.name for o in outcomes] == all_notebooks()
    failed = {o.name: o.error for o in outcomes if not o.ok}
    assert not failed, failed
    for name in all_notebooks():
        assert (out / f"{name}.ipynb").exists()


def test_every_csv_follows_the_schema(executed):
    _, out, _, _ = executed
    for name in all_notebooks():
        df = read_results(out / "data" / f"{name}.csv")
        assert len(df) > 0 and set(df["notebook"]) == {name}


def test_every_notebook_records_what_it_read(executed):
    """Each page's cache record names every run it loaded or trained (its execution's events say which), with the
    hash of that run's manifest, and every other page's CSV it read, with that CSV's hash."""
    _, out, store, _ = executed
    st = RunStore(store)
    events = st.events()
    for name in all_notebooks():
        reads = json.loads((out / ".cache" / f"{name}.json").read_text())["reads"]
        touched = {e["id"] for e in events if str(e.get("session", "")).startswith(f"{name}-")}
        assert touched <= set(reads["runs"]), (name, sorted(touched - set(reads["runs"]))[:3])
        for rid, sha in reads["runs"].items():
            assert sha is None or sha == hashlib.sha256((st.path(rid) / "manifest.json").read_bytes()).hexdigest()
        for page, sha in reads["csv"].items():
            assert sha == hashlib.sha256((out / "data" / f"{page}.csv").read_bytes()).hexdigest(), (name, page)
        assert "page.provenance()" in (ROOT / "notebooks" / f"{name}.py").read_text(), name
    # the pages that train read runs; the scoreboard reads every other page's CSV
    assert len(json.loads((out / ".cache" / "width_accuracy.json").read_text())["reads"]["runs"]) >= 2
    assert set(json.loads((out / ".cache" / "claims.json").read_text())["reads"]["csv"]) >= {"width_accuracy"}


def test_the_execution_report_has_every_notebook_and_the_build(executed, built):
    """The smoke book's execution report: a row per notebook with what its execution did, the totals, the build's
    commit, profile and data sets; rendered in About this book, with the landing page's line linking it."""
    import subprocess

    from lmcbook.specs import CODE_VERSION

    _, out, _, outcomes = executed
    rep = json.loads((out / book.REPORT_JSON).read_text())
    assert list(rep["notebooks"]) == all_notebooks()
    for o in outcomes:
        r = rep["notebooks"][o.name]
        assert (r["status"], r["loaded"], r["trained"]) == ("executed", o.loaded, o.trained), o.name
        assert r["seconds"] == round(o.seconds, 1) and r["code_version"] == CODE_VERSION
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    b = rep["build"]
    assert (b["commit"], b["profile"], b["ci"]) == (head, "smoke", book.ci_run())
    assert "digits" in b["datasets"]
    html = (built / "book" / "generated" / "report.html").read_text()
    for name in all_notebooks():
        assert f'<span class="doc">{name}</span>' in html, name
    assert html.count("<tr") == len(all_notebooks()) + 2  # the header, a row per notebook, the totals
    total = sum(round(o.seconds, 1) for o in outcomes)
    assert f"{len(outcomes)} executed, 0 cached, 0 failed" in html and f"{total:.1f}" in html
    landing = (built / "book" / "generated" / "overview.html").read_text()
    assert "This build:" in landing and "report.html" in landing and "profile <code" in landing


def test_second_execution_trains_nothing(executed, monkeypatch):
    base, out, store, _ = executed
    monkeypatch.chdir(ROOT)
    n_before = len(RunStore(store).events())
    outcomes = book.execute(["width_accuracy"], "smoke", {"widths": [0.25]}, base / "again", ROOT / "notebooks", store)
    assert outcomes[0].ok and outcomes[0].trained == 0
    events = RunStore(store).events()[n_before:]
    # the sweep loads its one pair, and the page's science cell loads that same pair again to recompute its row
    assert [e["event"] for e in events] == ["loaded"] * 4
    assert len({e["id"] for e in events}) == 2 and outcomes[0].loaded == 2  # each run counted once


def test_pages_glue_numbers_into_prose(executed):
    """Every key that a page's shown prose quotes (the alternatives not chosen aside) is glued by that page."""
    import nbformat

    _, out, _, _ = executed
    for path in sorted(out.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        shown = [c for c in nb.cells if "remove-cell" not in c.metadata.get("tags", [])]
        prose = "\n".join(c.source for c in shown if c.cell_type == "markdown")
        if path.stem == "width_accuracy":
            assert "{glue:text}`acc_merged_wide:.3f`" in prose
        keys = {a or b for a, b in re.findall(r"\{glue(?::\w+)?\}`(\w+)[^`]*`|\{glue:figure\}\s+(\w+)", prose)}
        glued = set()
        for cell in nb.cells:
            for o in cell.get("outputs", []):
                for mime in o.get("data", {}):
                    if mime.startswith("application/papermill.record/"):
                        glued.add(o["metadata"]["scrapbook"]["name"])
        assert keys <= glued, (path.stem, keys - glued)


def test_no_page_glues_a_key_twice(executed):
    """myst-nb warns on a key glued twice (the book builds with -W), and which value shows is then unclear."""
    import collections

    import nbformat

    _, out, _, _ = executed
    for path in sorted(out.glob("*.ipynb")):
        names = [o["metadata"]["scrapbook"]["name"] for cell in nbformat.read(path, as_version=4).cells
                 for o in cell.get("outputs", []) if "scrapbook" in o.get("metadata", {})]
        twice = [k for k, n in collections.Counter(names).items() if n > 1]
        assert not twice, f"{path.name} glues {twice} more than once"


def test_book_builds_with_warnings_as_errors(built):
    assert (built / "index.html").exists()
    for name in all_notebooks():
        assert (built / "book" / "generated" / f"{name}.html").exists()


#: The tables whose visible box (the table, or the nearest scrolling container it sits in) reaches beyond the
#: text column; each is named by its first words.
TABLES_WIDER_THAN_THE_COLUMN = """(() => {
  const main = document.querySelector('article.bd-article') || document.querySelector('main');
  if (!main) return [];
  const right = main.getBoundingClientRect().right + 1;
  return [...main.querySelectorAll('table')].filter(t => {
    let box = t;
    while (box && box !== main && !['auto', 'scroll', 'hidden'].includes(getComputedStyle(box).overflowX)) {
      box = box.parentElement;
    }
    return ((box && box !== main) ? box : t).getBoundingClientRect().right > right;
  }).map(t => t.innerText.slice(0, 60));
})()"""


def test_pages_render_in_a_browser(built):
    from playwright.sync_api import sync_playwright

    pages = sorted(built.rglob("*.html"))
    pages = [p for p in pages if p.name not in ("genindex.html", "search.html") and "_static" not in p.parts]
    assert len(pages) >= 5
    with sync_playwright() as pw:
        browser = _launch(pw, "--disable-background-networking")
        page = browser.new_page()
        for html in pages:
            if html.name == "index.html" and html.stat().st_size < 2000:
                continue  # the redirect stub
            page.goto(html.as_uri())
            page.wait_for_load_state("load")
            broken = page.evaluate("[...document.images].filter(i => !(i.complete && i.naturalWidth > 0))"
                                   ".map(i => i.src)")
            assert not broken, (html.name, broken)
            wide = page.evaluate(TABLES_WIDER_THAN_THE_COLUMN)
            assert not wide, (html.name, wide)
            if page.evaluate("document.querySelectorAll('.math, .MathJax, mjx-container').length"):
                page.wait_for_selector("mjx-container", timeout=15000)
                text = page.evaluate("document.querySelector('main').innerText")
                assert "\\(" not in text and "$$" not in text, html.name
        browser.close()


#: The most words of prose the landing page shows before its first figure (its findings tables aside).
ABSTRACT_WORDS = 300


def test_the_landing_page_opens_as_an_abstract(built):
    """Under the title, the findings (a table per paper, before any figure), then each paper's headline figure, with
    at most ABSTRACT_WORDS words of prose before the first; no code cell is shown anywhere on the page."""
    html = (built / "book" / "generated" / "overview.html").read_text()
    article = html[html.index("<article"):]
    assert "cell_input" not in article  # every code cell's input is removed
    first_figure = article.index("<figure")
    head = article[:first_figure]
    assert head.count("<table") >= 2, "the findings: a table per paper, under the title"
    prose = re.sub(r"<[^>]+>", " ", re.sub(r"<table.*?</table>", " ", head, flags=re.S))
    assert len(prose.split()) <= ABSTRACT_WORDS, len(prose.split())
    figures = re.findall(r'<figure[^>]*id="([^"]+)"', article)
    assert figures[:2] == ["fig-headline", "fig-noise-headline"], figures
    findings = re.sub(r"<[^>]+>", " ", head)
    for cid in ("W1", "W11", "M1", "N1", "N2"):
        assert re.search(rf"\b{cid}\b", findings), cid

def test_the_table_width_check_can_fail(tmp_path):
    """The check above flags a table that spills out of the column, and passes one in a scrolling container."""
    from playwright.sync_api import sync_playwright

    cells = "".join(f"<td>column{i:02d}</td>" for i in range(60))
    html = tmp_path / "t.html"
    html.write_text(f"<html><body><article class='bd-article' style='width:600px'>"
                    f"<table id='spills'><tr>{cells}</tr></table>"
                    f"<div style='overflow-x:auto'><table><tr>{cells}</tr></table></div></article></body></html>")
    with sync_playwright() as pw:
        browser = _launch(pw)
        page = browser.new_page()
        page.goto(html.as_uri())
        wide = page.evaluate(TABLES_WIDER_THAN_THE_COLUMN)
        browser.close()
    assert len(wide) == 1 and wide[0].startswith("column00")


FIGURELESS = {"claims"}  # the scoreboard is a table


def test_figure_pages_have_figures_captions_csv_links_and_reproduce_boxes(built):
    for name in all_notebooks():
        html = (built / "book" / "generated" / f"{name}.html").read_text()
        if name not in FIGURELESS and name != "own_models":
            assert html.count("<img") >= 1, name
        assert re.search(rf'href="[^"]*{name}\.csv"', html), name
        text = re.sub(r"<[^>]+>", "", html)
        assert "Reproduce this page" in text and f"--only {name}" in text, name
        for fig in re.findall(r"<figure.*?</figure>", html, flags=re.S):
            caption = re.search(r"<figcaption>(.*?)</figcaption>", fig, flags=re.S)
            assert caption and len(re.sub("<[^>]+>", "", caption.group(1)).strip()) > 40, (name, fig[:200])
            assert "Trained" in caption.group(1) or name == "theory_lewc", (name, caption.group(1)[:200])
    explorer = (built / "book" / "generated" / "explore.html").read_text()
    assert explorer.count("<img") == 1  # the default state is drawn once, not twice
    dl = list(built.rglob("_downloads/*/*.csv"))
    assert {p.stem for p in dl} >= set(all_notebooks())
    assert all(len(pd.read_csv(p)) > 0 for p in dl)


def test_scoreboard_and_csv_links_in_a_browser(built):
    from urllib.parse import unquote, urlparse

    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = _launch(pw, "--disable-background-networking")
        page = browser.new_page()
        page.goto((built / "book" / "generated" / "claims.html").as_uri())
        head = page.evaluate("[...document.querySelector('main table').querySelectorAll('thead th')]"
                             ".map(c => c.innerText.trim())")
        boards = ("[...document.querySelectorAll('main table')].filter(t => [...t.querySelectorAll('thead th')]"
                  ".some(c => c.innerText.trim() == 'result'))")  # every block's table, not the provenance's
        rows = page.evaluate(f"{boards}.flatMap(t => [...t.querySelectorAll('tbody tr')])"
                             ".map(r => [...r.querySelectorAll('td')].map(c => c.innerText.trim()))")
        assert len(rows) >= 13
        result = head.index("result")
        assert all(r[result] in ("✓", "✗", "inconclusive", "n/a") for r in rows), rows
        assert {r[0].split()[0] for r in rows} >= {"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "N3",
                                                   "M1", "M2", "M3", "M4", "M5", "M6"}
        links = page.evaluate(f"{boards}.flatMap(t => [...t.querySelectorAll('a')]).map(a => a.href)")
        assert len(links) >= 13 and all(Path(unquote(urlparse(h).path)).exists() for h in links)
        for name in all_notebooks():
            page.goto((built / "book" / "generated" / f"{name}.html").as_uri())
            hrefs = page.evaluate("[...document.querySelectorAll('a')].map(a => a.href)"
                                  ".filter(h => h.endsWith('.csv'))")
            assert hrefs, name
            for h in hrefs:
                target = Path(unquote(urlparse(h).path))
                assert target.exists() and target.stat().st_size > 0, (name, h)
        browser.close()


def test_the_repository_outputs_are_untouched(executed, built):
    start = executed[0].stat().st_mtime - 1
    for d in (ROOT / "book" / "generated", ROOT / "runs"):
        touched = [p for p in d.rglob("*") if p.is_file() and p.stat().st_mtime > start] if d.exists() else []
        assert not touched, touched[:3]


def test_notebook_cache_skips_unchanged_and_reruns_on_any_change(executed, tmp_path, monkeypatch):
    """jupyter-cache semantics: source, parameters, the library and every store entry read are the key."""
    base, out, store, _ = executed
    monkeypatch.chdir(ROOT)
    run = lambda names, params=None, nb=ROOT / "notebooks": book.execute(  # noqa: E731
        names, "smoke", params or {}, out, nb, store)
    # unchanged: skipped
    again = run(["theory_lewc", "width_accuracy"])
    assert [o.cached for o in again] == [True, True]
    # changed parameters: executed, then cached under the new key
    assert run(["theory_lewc"], {"seed": 3})[0].cached is False
    assert run(["theory_lewc"], {"seed": 3})[0].cached is True
    # changed source: executed
    nb_dir = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", nb_dir)
    src = nb_dir / "theory_lewc.py"
    src.write_text(src.read_text() + "\n# %%\nprint('changed')\n")
    assert run(["theory_lewc"], {"seed": 3}, nb_dir)[0].cached is False
    # a store entry it read changed (here: deleted, so it is retrained): executed
    rid = next(iter(json.loads((out / ".cache" / "width_accuracy.json").read_text())["reads"]["runs"]))
    shutil.rmtree(RunStore(store).path(rid))
    redo = run(["width_accuracy"])[0]
    assert redo.cached is False and redo.trained == 1
    # --force re-executes whatever the cache says
    forced = book.execute(["theory_lewc"], "smoke", {"seed": 3}, out, nb_dir, store, force=True)
    assert forced[0].cached is False


def _glued(nb) -> dict[str, set[str]]:
    """Return the glued keys of an executed notebook and each one's MIME types."""
    out: dict[str, set[str]] = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                out.setdefault(name, set()).update(m.split("/", 2)[-1] for m in o.get("data", {}))
    return out


def test_mechanism_page_has_its_figures_verdicts_and_conclusion(executed):
    import nbformat

    from lmcbook import claims

    _, out, _, _ = executed
    glued = _glued(nbformat.read(out / "mechanism.ipynb", as_version=4))
    for fig in ("fig_width", "fig_d", "fig_width_ref"):
        assert "image/png" in glued[fig], (fig, glued.get(fig))
    for key in ("cells", "verdicts", "regime_rows", "references", "hypotheses", "conclusion_table", "conclusion",
                "against_sets", "alternatives", "open_sets", "m5_mark", "m6_mark", "m1_state", "r1_state",
                "r2_state", "w1_long_state"):
        assert key in glued, key
    tr = read_results(out / "data" / "mechanism.csv")
    assert {"decay_integral", "init_distance", "train_acc", "delta_rel_stable_rank", "acc_merged", "orth_ratio",
            "rel_effective_rank", "llfc_rel_err"} <= set(tr["metric"])
    assert set(tr["method"].dropna()) >= {"none", "weight_matching", "trained", "untrained", "weight_matched"}
    assert tr["epochs"].nunique() >= 2 and tr["weight_decay"].nunique() >= 2 and tr["init_scale"].nunique() == 2
    assert set(tr["dataset"]) == {"digits"}
    board = read_results(out / "data" / "claims.csv")
    passed = board[board["metric"] == "claim_passed"]
    for claim in ("W1", "W6", "W7"):
        own = passed[(passed["method"] == claim) & passed["source"].isna()]
        assert sorted(own["regime"]) == ["long", "short"], claim
    assert passed["regime"].dropna().isin(["short", "long"]).all()
    own = board[board["source"].isna()]
    d = own[own["metric"] == "decay_integral"].set_index(["method", "regime"])["value"]
    assert d["W1", "long"] > d["W1", "short"] > 0
    for m in ("M1", "M2", "M3", "M4", "M5", "M6"):
        assert claims.state_of(board, m) in claims.verdicts.MARKS  # one row per M claim for this build


def test_every_width_page_carries_its_regime(executed):
    _, out, _, _ = executed
    for name in ("width_accuracy", "loss_barrier_calibration", "lewc", "weak_additivity", "reciprocal_orthogonality",
                 "neuron_overlap", "low_rank", "lewc_depth", "weak_weight_decay", "random_permutation",
                 "weight_matching", "llfc_vs_lewc", "mechanism"):
        df = read_results(out / "data" / f"{name}.csv")
        for metric in ("decay_integral", "init_distance"):
            units = df.loc[df["metric"] == metric, "hidden_units"]
            assert set(units) == set(df["hidden_units"].dropna()), (name, metric)


def _glued_values(nb, mime: str = "text/plain") -> dict[str, str]:
    """Return each glued key's value of an executed notebook: its text/plain (Python repr), or another ``mime``."""
    out = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                out[name] = o.get("data", {}).get(f"application/papermill.record/{mime}")
    return out


def test_no_page_shows_unrendered_myst(built):
    """A directive or role inside glued Markdown is not parsed: it would print literally.  No rendered page may show
    one, and the reference figures are real images.  A cell's source (a folded cell's, say) may hold such text as
    code; the check reads the page without its cells' inputs, and reads every output."""
    for html in (built / "book" / "generated").glob("*.html"):
        text = re.sub(r'<div class="cell_input[^>]*>.*?</pre>', "", html.read_text(), flags=re.S)
        for raw in ("{glue:figure}", "{glue:md}", "{glue:text}", "{doc}`", "```{"):
            assert raw not in text, (html.name, raw)
        # a glued Markdown table pasted inline prints as text: its rule row would show, and its pipes
        assert not re.search(r"\|\s*(?:---|—):?\s*\|", text), (html.name, "a Markdown table printed as text")


def test_alternative_prose_shows_one_sentence_per_choice(executed):
    """Of a page's alternative cells (tagged when:KEY=VALUE), the executed notebook shows exactly the chosen one
    per key; the mechanism page's conclusion is one of the outcomes claims.mechanism.conclusion chooses among."""
    import nbformat

    from lmcbook import book, claims

    _, out, _, _ = executed
    seen = 0
    for path in sorted(out.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        chosen = book.glued_words(nb)
        shown: dict[str, list[str]] = {}
        for cell in nb.cells:
            for tag in cell.metadata.get("tags", []):
                if tag.startswith(book.WHEN) and "remove-cell" not in cell.metadata.get("tags", []):
                    key, _, value = tag[len(book.WHEN):].partition("=")
                    shown.setdefault(key, []).append(value)
        for key, values in shown.items():
            assert values == [chosen[key]], (path.name, key, values)
        seen += len(shown)
    mech = book.glued_words(nbformat.read(out / "mechanism.ipynb", as_version=4))
    assert mech["conclusion"] in claims.mechanism.CONCLUSIONS
    written = {(src.stem, key) for src in (ROOT / "notebooks").glob("*.py")
               for key in re.findall(r'tags=\["when:(\w+)=', src.read_text())}
    assert seen == len(written) >= 8  # every key written in a source was chosen and shown once


def test_every_page_glues_the_scoreboards_verdict(executed):
    """A verdict is computed once: each page's glued state is the scoreboard's row, and page_claims of its CSV."""
    import ast

    import nbformat

    from lmcbook import claims

    _, out, _, _ = executed
    board = read_results(out / "data" / "claims.csv")
    for name in claims.PAGE_CLAIMS:
        nb = nbformat.read(out / f"{name}.ipynb", as_version=4)
        glued, glued_md = _glued_values(nb), _glued_values(nb, "text/markdown")
        rows = claims.page_claims(name, read_results(out / "data" / f"{name}.csv"))
        assert rows, name
        for r in rows:
            page_state = ast.literal_eval(glued[f"{r.key}_state"])
            assert page_state == r.state == claims.state_of(board, r.id, r.regime), (name, r.id, r.regime)
            # where the page's prose quotes the row (under the row's own key), it shows the scoreboard's numbers,
            # intervals included: the same text, computed from the CSV
            assert glued_md.get(f"{r.key}_measured", r.measured_shown) == r.measured_shown, (name, r.id, r.regime)
    for name in reference.REFERENCES:  # and every committed reference's rows, on the scoreboard and on its page
        if name not in reference.available(reference.get(name).notebook) or reference.get(name).notebook not in \
                claims.PAGE_CLAIMS:  # not committed, or a page without claims (the regime map)
            continue
        frame, _ = reference.load(name)
        page = str(frame["notebook"].iloc[0])
        glued = _glued_values(nbformat.read(out / f"{page}.ipynb", as_version=4))
        for r in claims.page_claims(page, frame):
            r.source = name
            assert claims.state_of(board, r.id, r.regime, source=name) == r.state, (name, r.id)
            if r.id.startswith(("M", "N")):  # the rows a page shows per reference (the mechanism's W/R rows: not)
                assert ast.literal_eval(glued[f"{r.key}_state"]) == r.state, (name, r.id)


def test_a_doctored_csv_fails_on_the_page_and_on_the_scoreboard(executed, tmp_path, monkeypatch):
    from lmcbook import claims

    base, out, store, _ = executed
    doctored = tmp_path / "generated"
    shutil.copytree(out, doctored)
    csv = doctored / "data" / "width_accuracy.csv"
    df = pd.read_csv(csv)
    merged = df["metric"] == "acc_merged"
    template = df[merged].iloc[0]
    # merged accuracy that falls with width, over enough widths and pairs for W1 to decide
    falling = pd.DataFrame([{**template.to_dict(), "hidden_units": u, "width": u / 64, "pair": p, "seed": float("nan"),
                             "value": 1.0 - u / 2000 + 0.001 * p} for u in (16, 64, 256, 1024) for p in range(2)])
    df = pd.concat([df[~merged], falling], ignore_index=True)
    df.to_csv(csv, index=False)
    assert claims.page_claims("width_accuracy", read_results(csv))[0].state == claims.verdicts.FAIL
    monkeypatch.chdir(ROOT)
    (o,) = book.execute(["claims"], "smoke", {}, doctored, ROOT / "notebooks", store)
    assert o.ok, o.error
    board = read_results(doctored / "data" / "claims.csv")
    assert claims.state_of(board, "W1", "short") == claims.verdicts.FAIL
    assert claims.state_of(read_results(out / "data" / "claims.csv"), "W1", "short") != claims.verdicts.FAIL


def test_a_page_built_from_another_pages_earlier_execution_is_marked_stale(tmp_path):
    """After `lmcbook execute --only width_accuracy -p ...`, the landing page and the scoreboard still hold the old
    sweep's numbers: the build marks each with one warning naming the page that changed, and only them."""
    import nbformat

    from lmcbook.book import mark_stale, stale_pages
    from lmcbook.page import file_sha, reads_path

    (tmp_path / "data").mkdir()
    csv = tmp_path / "data" / "width_accuracy.csv"
    csv.write_text("notebook,metric,value\nwidth_accuracy,acc,0.5\n")
    for name, sha in (("overview", file_sha(csv)), ("claims", file_sha(csv)), ("lewc", None)):
        reads_path(tmp_path, name).parent.mkdir(parents=True, exist_ok=True)
        reads_path(tmp_path, name).write_text(json.dumps({"csv": {"width_accuracy": sha}}))
    assert stale_pages(tmp_path) == {}
    csv.write_text("notebook,metric,value\nwidth_accuracy,acc,0.9\n")  # executed again with other parameters
    assert stale_pages(tmp_path) == {"overview": ["width_accuracy"], "claims": ["width_accuracy"]}
    nb = tmp_path / "overview.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title"),
                                                   nbformat.v4.new_markdown_cell("Text.")]), str(nb))
    for _ in range(2):  # every build marks it once
        mark_stale(nb, ["width_accuracy"])
    cells = nbformat.read(str(nb), as_version=4).cells
    assert [c.source.startswith(":::{warning}") for c in cells] == [False, True, False]
    assert "earlier execution of `width_accuracy`" in cells[1].source
