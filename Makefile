VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: test lint quickstart install clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The CPU build of torch must come first: a bare "torch" requirement would pull the CUDA build.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[hf,api,rag,ray,dev]"
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

test: lint
	$(VENV)/bin/pytest -n 2 --dist loadfile

quickstart: $(STAMP)
	$(VENV)/bin/assay run --model replay --model-args path=src/assay/data/ifeval/gpt4_responses.jsonl --tasks ifeval --output-dir out/quickstart

clean:
	rm -rf $(VENV) out .pytest_cache
