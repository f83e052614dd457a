# The two commands a newcomer needs: `make book` and `make test`.
# Both create the virtual environment first, so they work from a fresh clone.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: book test clean

# Reinstall whenever the pinned requirements or the package metadata change.
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

book: $(STAMP)
	$(PY) -m tools.build_book

# Grading kernels run sandboxed by bubblewrap (autograder/sandboxed_kernel.py).
BWRAP := /usr/bin/bwrap
$(BWRAP):
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get update && $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y bubblewrap

test: $(BWRAP) $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf _build
