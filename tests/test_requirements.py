"""The pinned environment: what every process of the course pays before it does anything."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.quick

# Modules that compile grammars when imported: rfc3987-syntax builds some 35 Earley parsers with lark, about
# 1.7 CPU-s, in every process that imports nbformat through jsonschema 4.25 or later (every nbgrader command,
# grading worker and Jupyter server). requirements.txt holds jsonschema at 4.24.1 to keep them out.
GRAMMAR_COMPILERS = ("rfc3987_syntax", "lark")


def test_reading_a_notebook_compiles_no_grammar():
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, nbformat, jupyter_events.validators; print(*sorted(sys.modules))"],
        capture_output=True, text=True, check=True).stdout.split()
    compilers = [name for name in imported if name.split(".")[0] in GRAMMAR_COMPILERS]
    assert not compilers, (
        f"importing nbformat imported {compilers}: a regenerated requirements.txt brought back a jsonschema "
        "whose format checkers compile grammars at import (see the note at its top)")
