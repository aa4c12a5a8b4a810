# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs the pinned dependencies (requirements.lock).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tfguard-installed
# NO_MKDOCS_2_WARNING: mkdocs-material's notice about MkDocs 2, printed on every build
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

.PHONY: demo test compat lint docs bench browser clean

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Headless Chromium renders the HTML report in the tests (Debian's package).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the HTML report tests"; \
	  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null; }

demo: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/tfguard demo

# The import contracts (pyproject: [tool.importlinter]), ruff and the docs site first, then the tests in two workers.
test: $(STAMP) browser
	$(BIN)/lint-imports
	$(BIN)/ruff check src tests benchmarks compat
	$(MKDOCS)
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/python -m pytest -q -n 2 --dist loadgroup

# The documentation site into site/ (mkdocs.yml); a broken link or reference fails it.
docs: $(STAMP)
	$(MKDOCS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks compat

# The wheel in fresh virtualenvs under .compat/ that already hold an older TensorFlow / Keras
# pair (compat/pairs.py: PAIRS; others as `make compat PAIRS="2.18.1/3.9.2 ..."`), a few minutes each.
compat: $(STAMP)
	$(BIN)/python compat/pairs.py $(PAIRS)

bench: $(STAMP)
	for b in benchmarks/*.py; do TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .compat runs build site src/*.egg-info
