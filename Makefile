# lmcbook: two commands on a fresh machine, `make book` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lmcbook-env
PROFILE ?= quick

.PHONY: env browser book execute build test test-fast lint bench clean

## env: create .venv (only if missing or older than pyproject.toml / constraints.txt)
env: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev,cluster]"
	@touch $(STAMP)

## book: execute every notebook at $(PROFILE) (trained runs are reused from ./runs) and render the book
book: env
	$(VENV)/bin/lmcbook execute --profile $(PROFILE)
	$(VENV)/bin/lmcbook build
	@echo "open _build/html/index.html"

## browser: the headless Chromium of the browser check (installed when missing and run as root)
browser:
	@command -v chromium-headless-shell >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" -eq 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium-headless-shell >/dev/null; \
	  else \
	    echo "make test needs headless Chromium; install it once with:"; \
	    echo "  sudo apt-get install -y --no-install-recommends chromium-headless-shell"; exit 1; \
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

clean:
	rm -rf _build book/generated
