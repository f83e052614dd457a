"""The code tabs of lessons 1 and 2 (LayerNorm, RMSNorm and GPT-2's tanh GELU in Python, C++ and Rust) are
the files in book/code/, shown on the page with {literalinclude}: each is compiled or imported here and
checked against PyTorch on random vectors of several widths, a constant vector and a tiny-variance one.

The C++ (g++ -std=c++17 -O2) and the Rust (rustc -O) are compiled once per module, each into a small driver
that #includes (C++) or include!s (Rust) the shown files, reads cases from stdin (`op width` then the
vectors) and prints one line of results per case. Without g++ or rustc their tests are skipped, saying so.

The reference is PyTorch's own function applied to the same float32 inputs widened to float64, so the
tolerance measures the shown code's rounding, not PyTorch's float32 rounding; the float32 results of
PyTorch are checked too, at float32 tolerance.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tools.course import COURSE

pytestmark = pytest.mark.quick

CODE = COURSE.root / "book" / "code"
EPS = 1e-5
WIDTHS = (1, 7, 768)


def tool(name: str) -> str | None:
    """A compiler on PATH, or rustup's usual home (~/.cargo/bin), or None."""
    found = shutil.which(name)
    if found:
        return found
    cargo = Path.home() / ".cargo" / "bin" / name
    return str(cargo) if cargo.exists() and os.access(cargo, os.X_OK) else None


# ---- the cases: (name, x, gamma, beta), all float32 ----------------------------------------------------

def cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(45)

    def randn(width, scale=1.0, offset=0.0):
        return torch.randn(width, generator=generator) * scale + offset

    found = []
    for width in WIDTHS:
        found.append((f"random-{width}", randn(width, 3.0, 1.0), randn(width), randn(width)))
    found.append(("constant-768", torch.full((768,), 3.5), randn(768), randn(768)))
    found.append(("tiny-variance-768", randn(768, 1e-3, 0.25), randn(768), randn(768)))
    found.append(("large-768", randn(768, 50.0, -20.0), randn(768), randn(768)))
    return [(name, x.float(), g.float(), b.float()) for name, x, g, b in found]


CASES = cases()


def layer_norm_reference(x, gamma, beta):
    return F.layer_norm(x.double(), x.shape, weight=gamma.double(), bias=beta.double(), eps=EPS)


def rms_norm_reference(x, gamma):
    norm = torch.nn.RMSNorm(x.shape[0], eps=EPS, dtype=torch.float64)
    with torch.no_grad():
        norm.weight.copy_(gamma.double())
        return norm(x.double())


def gelu_reference(x):
    return F.gelu(x.double(), approximate="tanh")


def close(ours, reference, what):
    """float32 tolerance around the float64 reference."""
    ours = torch.as_tensor(ours, dtype=torch.float64)
    torch.testing.assert_close(ours, reference, rtol=2e-6, atol=2e-6, msg=lambda m: f"{what}: {m}")


def test_pytorch_float32_agrees_with_its_float64_reference():
    """The references above are PyTorch's functions; in float32 they agree with them at float32 tolerance."""
    for name, x, gamma, beta in CASES:
        torch.testing.assert_close(F.layer_norm(x, x.shape, gamma, beta, eps=EPS).double(),
                                   layer_norm_reference(x, gamma, beta), rtol=1e-5, atol=1e-4, msg=name)
        torch.testing.assert_close(F.rms_norm(x, x.shape, gamma, eps=EPS).double(),
                                   rms_norm_reference(x, gamma), rtol=1e-5, atol=1e-5, msg=name)
        torch.testing.assert_close(F.gelu(x, approximate="tanh").double(), gelu_reference(x),
                                   rtol=1e-5, atol=1e-5, msg=name)


# ---- Python: the .py files the Python tabs show ----------------------------------------------------------

def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"book_code_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, x, gamma, beta", CASES, ids=[case[0] for case in CASES])
def test_python_tab_matches_pytorch(name, x, gamma, beta):
    norms, gelu = load(CODE / "norms.py"), load(CODE / "gelu.py")
    close(norms.layer_norm(x.tolist(), gamma.tolist(), beta.tolist()), layer_norm_reference(x, gamma, beta),
          f"layer_norm {name}")
    close(norms.rms_norm(x.tolist(), gamma.tolist()), rms_norm_reference(x, gamma), f"rms_norm {name}")
    close(gelu.gelu_tanh(x.tolist()), gelu_reference(x), f"gelu_tanh {name}")


# ---- C++ and Rust: drivers around the shown files ---------------------------------------------------------

CPP_DRIVER = r"""
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "norms.hpp"
#include "gelu.hpp"

static std::vector<float> read(std::size_t width) {
    std::vector<float> v(width);
    for (float& value : v) std::cin >> value;
    return v;
}

int main() {
    std::cout << std::setprecision(9);
    std::string op;
    std::size_t width;
    while (std::cin >> op >> width) {
        std::vector<float> x = read(width), out;
        if (op == "layer_norm") {
            std::vector<float> gamma = read(width), beta = read(width);
            out = layer_norm(x, gamma, beta);
        } else if (op == "rms_norm") {
            std::vector<float> gamma = read(width);
            out = rms_norm(x, gamma);
        } else if (op == "gelu_tanh") {
            out = gelu_tanh(x);
        } else {
            std::cerr << "unknown op " << op << "\n";
            return 2;
        }
        for (std::size_t i = 0; i < out.size(); ++i) std::cout << (i ? " " : "") << out[i];
        std::cout << "\n";
    }
}
"""

RUST_DRIVER = r"""
use std::io::Read;

include!("@CODE@/norms.rs");
include!("@CODE@/gelu.rs");

fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).unwrap();
    let mut words = input.split_whitespace();
    while let Some(op) = words.next() {
        let width: usize = words.next().unwrap().parse().unwrap();
        let mut read = || -> Vec<f32> {
            (0..width).map(|_| words.next().unwrap().parse::<f32>().unwrap()).collect()
        };
        let x = read();
        let out = match op {
            "layer_norm" => {
                let gamma = read();
                let beta = read();
                layer_norm(&x, &gamma, &beta, 1e-5)
            }
            "rms_norm" => {
                let gamma = read();
                rms_norm(&x, &gamma, 1e-5)
            }
            "gelu_tanh" => gelu_tanh(&x),
            _ => panic!("unknown op {op}"),
        };
        let line: Vec<String> = out.iter().map(|v| v.to_string()).collect();
        println!("{}", line.join(" "));
    }
}
"""


def build(folder: Path, compiler: str, source: str, text: str, flags: list[str]) -> Path:
    """Write the driver `source` (holding `text`) into `folder`, compile it with `flags`; the program."""
    (folder / source).write_text(text)
    program = folder / Path(source).stem
    run = subprocess.run([compiler, *flags, str(folder / source), "-o", str(program)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return program


@pytest.fixture(scope="module")
def cpp_program(tmp_path_factory) -> Path:
    compiler = tool("g++")
    if compiler is None:
        pytest.skip("g++ is not installed (not on PATH): the C++ tabs cannot be compiled here")
    return build(tmp_path_factory.mktemp("cpp"), compiler, "driver.cpp", CPP_DRIVER,
                 ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(CODE)])


@pytest.fixture(scope="module")
def rust_program(tmp_path_factory) -> Path:
    compiler = tool("rustc")
    if compiler is None:
        pytest.skip("rustc is not installed (neither on PATH nor in ~/.cargo/bin): the Rust tabs cannot be compiled")
    return build(tmp_path_factory.mktemp("rust"), compiler, "main.rs", RUST_DRIVER.replace("@CODE@", CODE.as_posix()),
                 ["-O", "--edition", "2021", "-D", "warnings"])


def numbers(tensor: torch.Tensor) -> str:
    return " ".join(format(value, ".9g") for value in tensor.tolist())      # 9 digits: float32 exactly


def run_cases(program: Path) -> dict[tuple[str, str], list[float]]:
    """Every case through every op in one run of the program: (op, case name) -> its output."""
    lines, keys = [], []
    for name, x, gamma, beta in CASES:
        width = x.shape[0]
        lines.append(f"layer_norm {width} {numbers(x)} {numbers(gamma)} {numbers(beta)}")
        lines.append(f"rms_norm {width} {numbers(x)} {numbers(gamma)}")
        lines.append(f"gelu_tanh {width} {numbers(x)}")
        keys += [("layer_norm", name), ("rms_norm", name), ("gelu_tanh", name)]
    run = subprocess.run([str(program)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    outputs = run.stdout.splitlines()
    assert len(outputs) == len(keys), run.stdout[-2000:]
    return {key: [float(word) for word in line.split()] for key, line in zip(keys, outputs)}


@pytest.mark.parametrize("language", ["cpp", "rust"])
def test_compiled_tabs_match_pytorch(language, request):
    results = run_cases(request.getfixturevalue(f"{language}_program"))
    for name, x, gamma, beta in CASES:
        assert len(results["layer_norm", name]) == x.shape[0]
        close(results["layer_norm", name], layer_norm_reference(x, gamma, beta), f"{language} layer_norm {name}")
        close(results["rms_norm", name], rms_norm_reference(x, gamma), f"{language} rms_norm {name}")
        close(results["gelu_tanh", name], gelu_reference(x), f"{language} gelu_tanh {name}")
        # and PyTorch's own float32 computation, at float32 tolerance
        torch.testing.assert_close(torch.tensor(results["gelu_tanh", name]), F.gelu(x, approximate="tanh"),
                                   msg=f"{language} gelu_tanh {name} against float32 PyTorch")


def test_constant_vector_gives_beta_and_no_nan():
    """A constant vector has variance 0: LayerNorm returns beta exactly, thanks to eps (no 0/0)."""
    norms = load(CODE / "norms.py")
    name, x, gamma, beta = next(case for case in CASES if case[0] == "constant-768")
    assert norms.layer_norm(x.tolist(), gamma.tolist(), beta.tolist()) == beta.tolist()


# ---- the pages show exactly these files --------------------------------------------------------------------

TABS = {
    "book/01-layernorm.md": ("code/norms.py", "code/norms.hpp", "code/norms.rs"),
    "book/02-mlp.md": ("code/gelu.py", "code/gelu.hpp", "code/gelu.rs"),
}


@pytest.mark.parametrize("page", TABS)
def test_pages_show_the_tested_files_in_synced_tabs(page):
    text = (COURSE.root / page).read_text()
    tab_set = re.search(r"^(:{4,})\{tab-set\}\n(.*?)^\1\s*$", text, re.S | re.M)
    assert tab_set, f"{page} has no tab-set"
    body = tab_set.group(2)
    assert re.search(r"^:sync-group: language$", body, re.M)
    labels = re.findall(r"\{tab-item\} (.+)\n:sync: (\w+)", body)
    assert labels == [("Python", "python"), ("C++", "cpp"), ("Rust", "rust")], labels
    shown = re.findall(r"```\{literalinclude\} (\S+)\n:language: (\w+)", body)
    assert [path for path, _ in shown] == list(TABS[page])
    assert [language for _, language in shown] == ["python", "cpp", "rust"]
    for path, _ in shown:
        assert (COURSE.root / "book" / path).is_file(), path


def test_lesson_states_the_widths_tested_here():
    """Lesson 1 says which widths these tests check: the ones they do."""
    prose = " ".join((COURSE.root / "book" / "01-layernorm.md").read_text().split())
    stated = ", ".join(str(width) for width in WIDTHS[:-1]) + f" and {WIDTHS[-1]}"
    assert f"vectors of width {stated}, a constant one" in prose


def test_tab_code_uses_the_standard_library_only():
    for path in CODE.iterdir():
        text = path.read_text()
        if path.suffix == ".py":
            assert set(re.findall(r"^import (\w+)|^from (\w+)", text, re.M)) <= {("math", "")}, path
        elif path.suffix == ".hpp":
            assert set(re.findall(r"#include <(\w+)>", text)) <= {"cmath", "cstddef", "stdexcept", "vector"}, path
        elif path.suffix == ".rs":
            assert "use " not in text and "extern crate" not in text, path
    assert math.isclose(load(CODE / "gelu.py").SQRT_2_OVER_PI, math.sqrt(2 / math.pi))
