# The two commands a newcomer needs: `make book` and `make test`.
# Both create the virtual environment first, so they work from a fresh clone. They also install the
# npm packages (MathJax, served by the site; axe-core, for the accessibility audit) and `make test`
# installs Debian's headless Chromium for the browser tests, with apt-get (as root, or through sudo).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NPM_STAMP := node_modules/.installed
CHROMIUM  := /usr/bin/chromium-headless-shell
APT_GET   := $(if $(filter 0,$(shell id -u)),,sudo) apt-get

.PHONY: book notebooks clean

# Reinstall whenever the pinned requirements or the package metadata change. uv installs them (pip only
# installs uv): it fetches, unpacks and byte-compiles on every core, 39 s on two cores against pip's 95 s for
# the same ~200 pinned packages, the same versions. uv reads neither pip's configuration files nor its PIP_
# variables, so the folders pip is told to find wheels in (find-links: where the course machines keep PyTorch's
# CPU build; without it torch==2.13.0 is PyPI's multi-GB CUDA build) are handed to it: both install the same files.
UV_VERSION := 0.13.9
FIND_LINKS = $(sort $(shell $(PYTHON) -m pip config list 2>/dev/null | sed -n "s/^[^=]*find-links='\(.*\)'$$/\1/p"))
UV_INSTALL = $(VENV)/bin/uv pip install --quiet --python $(PY)
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(UV_INSTALL) --compile-bytecode $(addprefix --find-links ,$(FIND_LINKS)) -r requirements.txt
	$(UV_INSTALL) --no-deps --no-build-isolation -e .
	touch $@

# The npm packages, exactly as package-lock.json pins them (Node.js and npm from Debian if missing).
$(NPM_STAMP): package.json package-lock.json
	command -v npm >/dev/null || { $(APT_GET) update && $(APT_GET) install -y nodejs npm; }
	npm ci --no-audit --no-fund
	touch $@

book: $(STAMP) $(NPM_STAMP)
	$(PY) -m tools.build_book

# What the tests need from Debian: bubblewrap (grading kernels run sandboxed by it:
# autograder/sandbox/sandboxed_kernel.py), Chromium's headless build (the browser tests; Playwright never downloads a
# browser of its own), PostgreSQL's server (the shared-gradebook tests start a throwaway one with initdb, which Debian puts
# off PATH, in /usr/lib/postgresql/<version>/bin) and Node.js's npm. The missing ones are installed by one
# apt-get run (one `apt-get update`; two apt-gets cannot run at once), as root or through sudo.
BWRAP := /usr/bin/bwrap
HAS_INITDB = $(shell command -v initdb || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null)
MISSING_PACKAGES = $(strip $(if $(wildcard $(BWRAP)),,bubblewrap) $(if $(wildcard $(CHROMIUM)),,chromium-headless-shell) \
	$(if $(HAS_INITDB),,postgresql) $(if $(shell command -v npm),,nodejs npm))
.PHONY: debian-packages
debian-packages:
	$(if $(MISSING_PACKAGES),$(APT_GET) update && $(APT_GET) install -y $(MISSING_PACKAGES),@:)
$(BWRAP):
	$(APT_GET) update && $(APT_GET) install -y bubblewrap

# The test command installs in two lines at once: Debian's packages and then the npm packages, beside the
# virtual environment (the longest: a fresh clone's install took 158 s one after the other with pip).
.PHONY: test test-prerequisites
test:
	$(MAKE) --jobs=2 --output-sync=target test-prerequisites
	$(PY) -m pytest
test-prerequisites: debian-packages $(STAMP) $(NPM_STAMP)
ifneq ($(filter test-prerequisites bench,$(MAKECMDGOALS)),)
$(NPM_STAMP): | debian-packages     # npm may come with the packages; one apt-get at a time
endif

# JupyterLab for one role (tools/lab.py; the tests in tests/lab start it the same way). `make student`: the
# Assignments tab and Validate, on the course's exchange (autograder/exchange), assignments fetched into
# ~/gpt2-block. `make instructor`: the formgrader, grading with autograder/nbgrader_config.py (the sandbox).
# Options go in LAB_ARGS, e.g. make student LAB_ARGS="--student ada --exchange /srv/nbgrader/exchange".
.PHONY: student instructor
student: $(STAMP)
	$(PY) -m tools.lab student $(LAB_ARGS)
instructor: $(BWRAP) $(STAMP)
	$(PY) -m tools.lab instructor $(LAB_ARGS)

# A JupyterHub for one class on this machine (deploy/hub/, tools/hub.py), as root: `make hub` prepares a local
# demo (the grader account, an instructor and three students with the password demo-<login>, the course in
# /srv/gpt2-block, the exchange, a control group for the grader account) and starts the hub on
# http://127.0.0.1:8000. The instructors' page walks an admin through a real deployment.
# `make hub-prerequisites` installs what a real class's hub needs, before `tools.hub prepare` (the instructors' page).
.PHONY: hub hub-prerequisites
hub: hub-prerequisites
	$(PY) -m tools.hub demo $(HUB_ARGS)
hub-prerequisites: debian-packages $(STAMP) $(NPM_STAMP)

# The lessons as .ipynb files in _build/notebooks, which the deploy workflow publishes on the
# `notebooks` branch for the Colab buttons (Colab cannot open MyST Markdown).
notebooks: $(STAMP)
	$(PY) -m tools.build_book --notebooks _build/notebooks

# Benchmarks (bench/, not tests): notebook execution, site builds, autograding (stock nbgrader against
# autograder.classgrader.grade_class, checked identical), and `.ci/run` in a fresh clone (cold install included).
# Figures print and land in _build/bench/; the README's performance table is rewritten from them
# (bench/published.py).
# `make bench BENCH_CLASS=100` for a larger synthetic class. Run on a quiet machine.
BENCH_CLASS ?= 20
.PHONY: bench
bench: debian-packages $(STAMP) $(NPM_STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m bench --class $(BENCH_CLASS)
	$(PY) -m bench.published

clean:
	rm -rf _build
