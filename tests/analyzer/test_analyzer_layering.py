"""The package's layering, as docs/architecture-of-the-code.md draws it: each subpackage of spinscope/ imports
only the packages ALLOWED names for it (the base modules, spinscope/*.py, import only each other), and no
module imports itself back through others (no circle, lazy imports inside functions included: a circle
that only closes at run time is still a circle). An import made by name is an import too: a module that
hands a string to importlib.import_module or __import__ imports the module it names (a constant), every
module below a constant prefix (an f-string or a sum: "spinscope.analysis.patterns." + name), and, when
the name is computed, every module of the package a string of its own names exactly (a table of module
paths). Each subpackage's __init__.py says the same in its docstring ("May import: ...") and imports
nothing. The program (spinscope/cli.py, the verb table, and __main__.py) is above every package. Checked
on the sources' syntax trees: nothing is imported or run."""
import ast
import re
from pathlib import Path

import pytest

import spinscope

PACKAGE = Path(spinscope.__file__).resolve().parent
BASE = "base"  # spinscope/*.py: errors, fmt, untrusted (and the version)
ENTRY = ("spinscope.__main__", "spinscope.cli")  # the program (`spinscope`, `python -m spinscope`): above everything

# package: the packages its modules may import (besides their own). Lower layers first.
ALLOWED = {
    BASE: set(),
    "tracing": {BASE},
    "analysis": {BASE},
    "output": {BASE, "analysis"},
    "web": {BASE},
    "live": {BASE, "tracing", "analysis", "output", "web"},
    "lab": {BASE, "tracing", "analysis", "output"},
    "commands": {BASE, "tracing", "analysis", "output", "live"},
}
MAX_LINES = 600  # no module longer


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([root.name, *parts])


def modules(root: Path = PACKAGE) -> dict:
    """Every module of the package: dotted name -> path."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def by_name(node: ast.AST) -> ast.expr | None:
    """The argument of an import made by name (`importlib.import_module(x)`, `import_module(x)`,
    `__import__(x)`), or None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return node.args[0] if called in ("import_module", "__import__") else None


def named(arg: ast.expr, tree: ast.AST, known: set) -> list:
    """The modules an import by name can import: the one a constant names, those below a constant prefix
    (f"spinscope.x.{name}", "spinscope.x." + name), else every module a string constant of the file names."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    first = arg.values[0] if isinstance(arg, ast.JoinedStr) and arg.values else \
        arg.left if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value:
        return sorted(m for m in known if m.startswith(first.value))
    return sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in known})


def imports(path: Path, name: str, known: set) -> list:
    """(line, the module of the package it imports) for every import in the file, anywhere in it: an
    `from X import y` names X.y when that is a module, else X (a name defined in X); an import by name
    (by_name) the modules `named` finds."""
    is_package = path.name == "__init__.py"
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if (arg := by_name(node)) is not None:
            targets = named(arg, tree, known)
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known and "." in target:  # `import spinscope.x.y as z`, a name in x
                target = target.rsplit(".", 1)[0]
            if target in known:
                found.append((node.lineno, target))
    return found


def graph(root: Path = PACKAGE) -> dict:
    """module -> {module it imports: first line}."""
    known = modules(root)
    edges = {}
    for name, path in known.items():
        edges[name] = {}
        for line, target in imports(path, name, set(known)):
            if target != name:
                edges[name].setdefault(target, line)
    return edges


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and (PACKAGE / f"{parts[1]}.py").is_file()):
        return BASE
    return parts[1]


def upward(edges: dict) -> list:
    """`module:line -> target` for every import ALLOWED does not permit."""
    wrong = []
    for module, targets in edges.items():
        if module in ENTRY:
            continue
        for target, line in targets.items():
            if layer(target) != layer(module) and layer(target) not in ALLOWED[layer(module)]:
                wrong.append(f"{module}:{line} -> {target}")
    return sorted(wrong)


def circles(edges: dict) -> list:
    """The import circles: each strongly connected set of more than one module (Tarjan), sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def test_every_module_is_in_a_known_layer():
    assert {layer(m) for m in modules() if m not in ENTRY} <= set(ALLOWED)
    assert {"analysis", "output", "live", "web", "commands", "lab", "tracing"} <= {layer(m) for m in modules()}
    assert layer("spinscope.errors") == BASE and layer("spinscope.analysis.capture") == "analysis"


def test_no_import_goes_up_or_sideways():
    assert upward(graph()) == []


def test_no_import_circle():
    assert circles(graph()) == []


def test_no_module_over_600_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


@pytest.mark.parametrize("package", sorted(set(ALLOWED) - {BASE}))
def test_each_package_says_what_it_owns_and_may_import(package):
    init = PACKAGE / package / "__init__.py"
    tree = ast.parse(init.read_text())
    doc = ast.get_docstring(tree) or ""
    assert len(doc) > 200, f"{package}/__init__.py: a paragraph on what the package owns"
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))], "imports nothing"
    said = re.search(r"May import: ([^.]*)\.", doc.replace("\n", " "))
    assert said, f"{package}/__init__.py: no `May import: ...` sentence"
    names = {w.strip() for w in said.group(1).replace(" and ", ",").split(",") if w.strip()}
    assert names == {"nothing"} if not ALLOWED[package] else names == ALLOWED[package], (package, names)


# ---------------------------------------------------------------------------------------------------------
# The check itself, on packages made up here


def fake_package(tmp_path: Path, files: dict) -> Path:
    root = tmp_path / "spinscope"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize("form", [
    "import spinscope.live.exporter", "import spinscope.live.exporter as e", "from spinscope.live import exporter",
    "from spinscope.live.exporter import METRICS", "from ..live import exporter", "from ..live.exporter import x",
    "def f():\n    from spinscope.live import exporter"])
def test_the_check_sees_every_import_form(tmp_path, form):
    root = fake_package(tmp_path, {"live/__init__.py": "", "live/exporter.py": "", "web/__init__.py": "",
                                   "web/guard.py": form + "\n"})
    assert graph(root)["spinscope.web.guard"] == {"spinscope.live.exporter": form.count("\n") + 1}


def test_the_check_finds_a_circle_and_an_upward_import(tmp_path):
    root = fake_package(tmp_path, {
        "analysis/__init__.py": "", "analysis/a.py": "from spinscope.analysis import b\n",
        "analysis/b.py": "def f():\n    from spinscope.analysis.a import x\n",
        "analysis/c.py": "from spinscope.output.figures import plot\n",
        "output/__init__.py": "", "output/figures.py": "from spinscope.analysis import c\n"})
    edges = graph(root)
    assert circles(edges) == [["spinscope.analysis.a", "spinscope.analysis.b"],
                              ["spinscope.analysis.c", "spinscope.output.figures"]]
    assert upward(edges) == ["spinscope.analysis.c:1 -> spinscope.output.figures"]


@pytest.mark.parametrize("form, imported", [
    ('importlib.import_module("spinscope.live.exporter")', ["spinscope.live.exporter"]),
    ('__import__("spinscope.live.exporter")', ["spinscope.live.exporter"]),
    ('import_module(f"spinscope.live.{verb}")', ["spinscope.live.exporter", "spinscope.live.top"]),
    ('importlib.import_module("spinscope.live." + verb)', ["spinscope.live.exporter", "spinscope.live.top"]),
    ('importlib.import_module(TABLE[verb])', ["spinscope.live.top"])])
def test_the_check_sees_an_import_by_name(tmp_path, form, imported):
    """cli.py imports the verb asked for by a string from its table: the layering holds for those too."""
    root = fake_package(tmp_path, {"live/__init__.py": "", "live/exporter.py": "", "live/top.py": "",
                                   "web/__init__.py": "",
                                   "web/guard.py": f"import importlib\nTABLE = {{'top': 'spinscope.live.top', 'x': 'top'}}\n"
                                                   f"def f(verb):\n    return {form}\n"})
    assert sorted(graph(root)["spinscope.web.guard"]) == imported
    assert upward(graph(root)) == [f"spinscope.web.guard:4 -> {m}" for m in imported]


def test_the_lab_is_above_the_core():
    """The profiler core does not depend on the research lab (the lab uses the core, never the other way)."""
    assert not any("lab" in allowed for package, allowed in ALLOWED.items() if package != "lab")
