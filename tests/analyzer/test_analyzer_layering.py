"""The profiler core does not depend on the research lab: no module of spinscope/ outside spinscope/lab/
imports spinscope.lab (the lab uses the core, never the other way round). Checked on the sources' syntax
trees, so nothing is imported or run."""
import ast
from pathlib import Path

import spinscope

PACKAGE = Path(spinscope.__file__).resolve().parent
LAB = "spinscope.lab"


def lab_imports(path: Path) -> list:
    """The import statements of a core module that reach spinscope.lab, as `line: text`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # Relative imports are resolved against the package: `from .lab import x`, `from . import lab`.
            base = ("spinscope." * bool(node.level) + (node.module or "")).rstrip(".") or "spinscope"
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        if any(name == LAB or name.startswith(LAB + ".") for name in names):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def core_modules() -> list:
    """Every module of the package outside spinscope/lab/."""
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "lab")


def test_core_modules_exist():
    names = {p.name for p in core_modules()}
    assert {"capture.py", "metrics.py", "labels.py", "report.py", "cli.py"} <= names
    assert not any(p.parent.name == "lab" for p in core_modules())


def test_no_core_module_imports_the_lab():
    offenders = {str(p.relative_to(PACKAGE)): lab_imports(p) for p in core_modules()}
    assert {name: lines for name, lines in offenders.items() if lines} == {}


def test_the_check_sees_every_import_form(tmp_path):
    forms = ["import spinscope.lab", "import spinscope.lab.claims as c", "from spinscope.lab import claims",
             "from spinscope.lab.matrix import Cell", "from spinscope import lab", "from . import lab",
             "from .lab.sweep import run", "def f():\n    from spinscope.lab import netcond"]
    for form in forms:
        path = tmp_path / "m.py"
        path.write_text(form + "\n")
        assert lab_imports(path), form
    path.write_text("import spinscope.analysis.labels\nfrom spinscope import labels\nfrom .labels import assess\n")
    assert lab_imports(path) == []
