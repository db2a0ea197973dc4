"""The declared dependencies (pyproject.toml) against what each part of src/lrnn imports.

Every import counts, at module level or inside a function (lazy). Each module belongs to one
part: the library (`dependencies`), the notebooks' side, the grader/doctor or the GPU peers
(extras); a part may import its own declared distributions and the library's."""
import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

from _rules import assert_every

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "lrnn"

#: (part, module path patterns relative to src/lrnn), first match wins.
PARTS = (
    ("peers", ("benchmarks/peers.py",)),
    ("grading", ("course/grade.py", "course/grading/*.py", "course/doctor/*.py",
                 "course/exercises.py",
                 "course/colab.py")),
    ("notebooks", ("training/*.py", "benchmarks/*.py", "course/*.py", "course/check/*.py")),
    ("base", ("*.py", "scan/*.py", "layers/*.py")),
)
#: import name -> distribution name, where they differ.
DISTRIBUTION = {"IPython": "ipython", "PIL": "pillow", "sklearn": "scikit-learn",
                "yaml": "pyyaml", "fla": "fla-core", "accelerated_scan": "accelerated-scan"}
#: distributions that JAX itself requires (checked below against jax's metadata).
FROM_JAX = {"jaxlib", "ml-dtypes"}
#: declared but never imported: a kernel that nbclient starts, not a module the code imports.
RUNTIME_ONLY = {"ipykernel"}
JUPYTER = {"ipython", "ipykernel", "ipywidgets", "nbformat", "nbclient", "jupyter-client",
           "jupyter-core", "notebook", "traitlets", "matplotlib", "tqdm", "optax", "mlxtend"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(spec: str) -> str:
    return canonical(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec).group(1))


def declared() -> dict[str, set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    raw = {"base": project["dependencies"], **project["optional-dependencies"]}
    out = {}
    for part, specs in raw.items():
        names = set()
        for spec in specs:
            m = re.fullmatch(r"lrnn\[([\w,]+)\]", spec.strip())
            if m:   # an extra that includes other extras
                for other in m.group(1).split(","):
                    names |= {requirement_name(s) for s in raw[other]}
            else:
                names.add(requirement_name(spec))
        out[part] = names
    return out


def part_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    for part, patterns in PARTS:
        if any(rel.match(p) and len(rel.parts) == len(Path(p).parts) for p in patterns):
            return part
    raise AssertionError(f"{rel}: in no part of tests/test_dependencies.py PARTS")


def imports(path: Path) -> set[str]:
    """Distribution names of every third-party import in the file (lazy ones included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {canonical(DISTRIBUTION.get(n, n)) for n in names
            if n not in sys.stdlib_module_names and n not in ("lrnn", "__future__")}


MODULES = sorted(SRC.rglob("*.py"))


def test_every_module_has_a_part():
    assert MODULES
    for path in MODULES:
        part_of(path)


def check_module_imports_only_what_its_part_declares(path):
    parts = declared()
    part = part_of(path)
    allowed = parts["base"] | FROM_JAX | (parts[part] if part != "base" else set())
    extra = imports(path) - allowed
    assert not extra, (f"{path.relative_to(ROOT)} ({part}) imports {sorted(extra)}, not declared "
                       f"for {'the library' if part == 'base' else f'extra {part!r}'} in pyproject.toml")


def test_module_imports_only_what_its_part_declares():
    assert_every(MODULES, check_module_imports_only_what_its_part_declares,
                 name=lambda p: p.relative_to(SRC).as_posix())


def test_the_library_pulls_no_jupyter_or_grading_package():
    base = declared()["base"]
    assert base == {"jax", "numpy"}, base
    assert not base & JUPYTER


def test_each_declared_extra_is_imported_by_its_part():
    parts = declared()
    used = {p: set() for p in parts}
    for path in MODULES:
        used[part_of(path)] |= imports(path)
    for part in ("notebooks", "grading", "peers"):
        own = parts[part] - parts["base"] - (parts["notebooks"] if part == "grading" else set())
        unused = own - used[part] - RUNTIME_ONLY - {"einops", "triton"}
        assert not unused, f"extra {part!r} declares {sorted(unused)}, which {part} never imports"


def test_jax_brings_jaxlib_and_ml_dtypes():
    try:
        requires = importlib.metadata.requires("jax") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("jax not installed")
    unconditional = {requirement_name(r) for r in requires if ";" not in r}
    assert FROM_JAX <= unconditional, requires
