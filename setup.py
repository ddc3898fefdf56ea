"""Packaging beyond pyproject.toml: a wheel that carries the collector (`make dist`).

With SPINSCOPE_BUNDLE_COLLECTOR naming an executable (make dist points it at build/dist/spinscope-collector,
statically linked), the wheel holds it as spinscope/_bin/spinscope-collector, executable bit kept, and is
tagged for this platform (py3-none-linux_<arch>): it carries native code, so it is not `any`. Without the
variable (`pip install -e .`, the editable install of scripts/setup.sh, or a plain `pip install .`) the
package is pure Python and finds its collector elsewhere (spinscope/tracing/collector.py: the lookup order).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

BUNDLE_ENV = "SPINSCOPE_BUNDLE_COLLECTOR"
BUNDLED = Path("spinscope", "_bin", "spinscope-collector")  # where spinscope/tracing/collector.py looks (BUNDLED_DIR)


def bundle_source() -> Path | None:
    """The collector to put in the wheel, or None for a pure-Python build."""
    value = os.environ.get(BUNDLE_ENV)
    if not value:
        return None
    path = Path(value)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise SystemExit(f"{BUNDLE_ENV}={value}: not an executable file (build it with `make dist`)")
    return path


class BuildPyWithCollector(build_py):
    def run(self) -> None:
        super().run()
        source = bundle_source()
        if source is None or getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib, BUNDLED)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        target.chmod(0o755)
        assert target.stat().st_mode & stat.S_IXUSR

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if bundle_source() is not None and not getattr(self, "editable_mode", False):
            outputs.append(str(Path(self.build_lib, BUNDLED)))
        return outputs


class PackageWithCollector(Distribution):
    def has_ext_modules(self) -> bool:
        """Native code inside, so the wheel is platform-specific and its files go in its root (platlib)."""
        return bundle_source() is not None


class PlatformWheel(bdist_wheel):
    """py3-none-<platform> when the collector is bundled: any Python 3, no ABI, this OS and machine."""

    def get_tag(self) -> tuple[str, str, str]:
        python, abi, plat = super().get_tag()
        if bundle_source() is not None:
            python, abi = "py3", "none"
        return python, abi, plat


setup(distclass=PackageWithCollector,
      cmdclass={"build_py": BuildPyWithCollector, "bdist_wheel": PlatformWheel},
      # setuptools' own scratch space, apart from the Makefile's build/ outputs (and emptied by make dist)
      options={"build": {"build_base": "build/setuptools"}})
