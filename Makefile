# lmcbook: two commands on a fresh machine, `make book` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lmcbook-env
PROFILE ?= quick

.PHONY: env book execute build test test-fast lint bench clean

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

## test: the whole suite (unit tests, smoke-profile notebooks, book build, browser check)
test: env
	$(PY) -m pytest -q

## test-fast: unit tests only
test-fast: env
	$(PY) -m pytest -q -m "not integration"

## bench: training throughput against the naive loop, probe cost, book time (writes bench.json)
bench: env
	$(VENV)/bin/lmcbook bench --json bench.json --book

lint: env
	$(VENV)/bin/ruff check lmcbook tests

clean:
	rm -rf _build book/generated
