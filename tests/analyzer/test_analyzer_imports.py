"""The package as a whole: it runs on the oldest Python it claims, every module imports on its own, and the
command line imports only the verb it runs (`spinscope --version` and `spinscope record` start in a
fraction of the time pandas and matplotlib take to load)."""

from __future__ import annotations

import os
import pkgutil
import re
import subprocess
import sys
import tomllib

import pytest

import spinscope
from spinscope.cli import VERBS, build_parser
from paths import PYPROJECT

MODULES = sorted(m.name for m in pkgutil.walk_packages(spinscope.__path__, "spinscope.")
                 if m.name != "spinscope.__main__")  # __main__ runs the CLI
ANALYSIS = ("pandas", "numpy", "matplotlib", "spinscope.analysis.capture", "spinscope.analysis.metrics", "spinscope.analysis.labels")


def python_floor() -> tuple:
    spec = tomllib.loads(PYPROJECT.read_text())["project"]["requires-python"]
    match = re.fullmatch(r">=\s*(\d+)\.(\d+)", spec)
    assert match, f"requires-python {spec!r} is not of the form >=X.Y"
    return int(match[1]), int(match[2])


@pytest.mark.skipif(not os.environ.get("CI"), reason="CI runs the suite on the oldest Python pyproject claims")
def test_ci_runs_the_oldest_python_pyproject_claims():
    running, floor = sys.version_info[:2], python_floor()
    assert running == floor, (f"CI runs Python {running[0]}.{running[1]} but pyproject claims >={floor[0]}.{floor[1]}: "
                              "run CI on that Python, or raise the claim")


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_on_its_own_without_warnings(module):
    result = subprocess.run([sys.executable, "-W", "error", "-c", f"import {module}"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def modules_loaded(code: str) -> set:
    """The modules a fresh interpreter has loaded after running `code` (which may exit, as the CLI does)."""
    script = f"import sys\ntry:\n    {code}\nexcept SystemExit:\n    pass\nprint('\\n' + ' '.join(sys.modules))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    return set(result.stdout.splitlines()[-1].split())


def heavy(loaded: set, prefixes) -> list:
    return sorted(name for name in loaded if name.split(".")[0] in prefixes or name in prefixes)


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["nope"]])
def test_top_level_imports_no_verb(argv):
    loaded = modules_loaded(f"from spinscope.cli import main; main({argv!r})")
    assert not heavy(loaded, ("rich", *ANALYSIS)), "imported at start-up"
    assert not {module for module, _ in VERBS.values()} & loaded


def test_record_imports_no_analysis():
    loaded = modules_loaded("from spinscope.cli import main; main(['record', '--help'])")
    assert "spinscope.commands.record" in loaded
    assert not heavy(loaded, ANALYSIS)


@pytest.mark.parametrize("verb", ["report", "diff"])
def test_report_and_diff_load_matplotlib_only_to_draw(verb):
    loaded = modules_loaded(f"from spinscope.cli import main; main([{verb!r}, '--help'])")
    assert f"spinscope.commands.{verb}" in loaded and "spinscope.analysis.labels" in loaded
    assert not heavy(loaded, ("matplotlib", "spinscope.output.figures"))
    # The analysis is pure Python (the exporter judges with it every scrape); diff's noise test uses pandas.
    assert ("pandas" in loaded) == (verb == "diff")


@pytest.mark.parametrize("verb", VERBS)
def test_verb_help_line_is_the_one_its_module_registers(verb):
    """`spinscope --help` lists the table's line for a verb not imported: the same as its module's."""
    assert build_parser(verb).format_help() == build_parser().format_help()
