# The two commands a newcomer needs: `make book` and `make test`.
# Both create the virtual environment first, so they work from a fresh clone. They also install the
# npm packages (MathJax, served by the site; axe-core, for the accessibility audit) and `make test`
# installs Debian's Chromium for the browser tests, with apt-get (as root, or through sudo).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NPM_STAMP := node_modules/.installed
CHROMIUM  := /usr/bin/chromium
APT_GET   := $(if $(filter 0,$(shell id -u)),,sudo) apt-get

.PHONY: book test notebooks clean

# Reinstall whenever the pinned requirements or the package metadata change.
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# The npm packages, exactly as package-lock.json pins them (Node.js and npm from Debian if missing).
$(NPM_STAMP): package.json package-lock.json
	command -v npm >/dev/null || { $(APT_GET) update && $(APT_GET) install -y nodejs npm; }
	npm ci --no-audit --no-fund
	touch $@

# The browser tests drive Debian's Chromium; Playwright never downloads a browser of its own.
$(CHROMIUM):
	$(APT_GET) update && $(APT_GET) install -y chromium

book: $(STAMP) $(NPM_STAMP)
	$(PY) -m tools.build_book

# Grading kernels run sandboxed by bubblewrap (autograder/sandboxed_kernel.py).
BWRAP := /usr/bin/bwrap
$(BWRAP):
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get update && $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y bubblewrap

# The PostgreSQL gradebook tests (tests/postgres.py) start a throwaway server with PostgreSQL's initdb,
# which Debian's `postgresql` package puts off PATH, in /usr/lib/postgresql/<version>/bin.
.PHONY: postgresql
postgresql:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ $(APT_GET) update && $(APT_GET) install -y postgresql; }

test: $(BWRAP) $(STAMP) $(NPM_STAMP) $(CHROMIUM) postgresql
	$(PY) -m pytest

# JupyterLab for one role (tools/lab.py; the tests in tests/lab start it the same way). `make student`: the
# Assignments tab and Validate, on the course's exchange (autograder/exchange), assignments fetched into
# ~/gpt2-block. `make instructor`: the formgrader, grading with autograder/nbgrader_config.py (the sandbox).
# Options go in LAB_ARGS, e.g. make student LAB_ARGS="--student ada --exchange /srv/nbgrader/exchange".
.PHONY: student instructor
student: $(STAMP)
	$(PY) -m tools.lab student $(LAB_ARGS)
instructor: $(BWRAP) $(STAMP)
	$(PY) -m tools.lab instructor $(LAB_ARGS)

# The lessons as .ipynb files in _build/notebooks, which the deploy workflow publishes on the
# `notebooks` branch for the Colab buttons (Colab cannot open MyST Markdown).
notebooks: $(STAMP)
	$(PY) -m tools.build_book --notebooks _build/notebooks

# Benchmarks (bench/, not tests): notebook execution, site builds, autograding (stock nbgrader against
# autograder.grade_class, checked identical), a cold venv install and the test command. Figures print and
# land in _build/bench/. `make bench BENCH_CLASS=100` for a larger synthetic class. Run on a quiet machine.
BENCH_CLASS ?= 20
.PHONY: bench
bench: $(BWRAP) $(STAMP) $(NPM_STAMP) $(CHROMIUM)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m bench --class $(BENCH_CLASS) --install

clean:
	rm -rf _build
