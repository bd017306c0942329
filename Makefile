# Everything needs only python3 (>= 3.11) and make: the first target that needs the
# environment creates it from the hash-pinned lock file.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export UV_COMPILE_BYTECODE := 1
export DAGSTER_HOME := $(CURDIR)/.dagster_home
export NO_PROXY := 127.0.0.1,localhost
export no_proxy := 127.0.0.1,localhost
# dg runs in the project's environment; saying so keeps it from warning about a mismatch.
export VIRTUAL_ENV := $(CURDIR)/$(VENV)

.PHONY: install test test-fast lint typecheck defs docs pytest run ui bench bench-all lock clean

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("eval_pipeline needs Python >= 3.11") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
	$(BIN)/uv pip sync --quiet --python $(BIN)/python requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	@mkdir -p $(DAGSTER_HOME)
	@touch $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

# The code location loads as a `dg` project: every definition under eval_pipeline/defs/.
defs: install
	$(BIN)/dg check defs

# The documentation site; --strict turns a broken link or anchor, or a page missing from the nav,
# into a failure (not with --quiet: it hides the warnings that --strict counts).
docs: install
	$(BIN)/mkdocs build --strict --site-dir site

# Bytecode is written (to the git-ignored __pycache__ folders) even where PYTHONDONTWRITEBYTECODE
# is set: else each pytest worker rewrites every test module's assertions again, and every
# process a test starts compiles the package again.
pytest: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest

# pytest's workers keep both cores busy; the checks before it (mypy above all) would leave the
# other idle, so they all run at once, each one's output printed whole when it ends.
test: install
	@$(MAKE) --no-print-directory -j5 --output-sync=target lint typecheck defs docs pytest

# What a developer runs while working: the pure core and the CLI without Dagster, servers or real
# processes (`-m "not slow"`: tests/conftest.py names what is slow); `make test` runs everything.
test-fast: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -m "not slow"

# The evaluation itself can end CRITICAL or under a gate (exit 1): that is a result, not a
# failed `make run`. Bad input (2) or an internal error (3) still fails.
# The package is installed editable, so its bytecode is compiled here (only what changed), not at
# install: where PYTHONDONTWRITEBYTECODE is set, every run would compile it again in memory.
run: install
	@$(BIN)/python -m compileall -q eval_pipeline
	@$(BIN)/eval-pipeline run --model local-minilm --model local-hybrid; \
	status=$$?; \
	if [ $$status -eq 1 ]; then echo "make run: evaluation finished; its gate failed (see above)"; fi; \
	[ $$status -le 1 ]

ui: install
	$(BIN)/python -m eval_pipeline.orchestration.dev_server -h 127.0.0.1 -p 3000

# The quick benchmarks, one table: benchmarks/results.md, rewritten as each finishes (a few
# minutes); bench-all runs every benchmark (~20 min). See docs/performance.md.
bench: install
	$(BIN)/python -m benchmarks --quick

bench-all: install
	$(BIN)/python -m benchmarks

lock:
	$(BIN)/uv pip compile pyproject.toml --extra dev --generate-hashes --python-version 3.11 \
		--python-platform x86_64-unknown-linux-gnu -o requirements.lock

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache site
