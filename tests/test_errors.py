"""One root exception per package (docs/contracts.md, "Errors"), checked over every module.

Every exception class that ``fakes``, ``conformance`` or ``reports`` defines derives from its
package's root, so a caller catches a package's errors in one clause. The reference agent does
not know the harness and keeps its own root; it is not walked.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

import conformance
import fakes
import reports
from conformance.errors import ConformanceError
from fakes.errors import FakesError
from reports.errors import ReportsError

ROOTS: dict[str, tuple[ModuleType, type[Exception]]] = {
    "fakes": (fakes, FakesError),
    "conformance": (conformance, ConformanceError),
    "reports": (reports, ReportsError),
}
# Raised on purpose, yet no error of the harness: the pytest plugin fails a scenario item with
# it when a verdict is a regression, as an assertion fails a test.
OUTSIDE = {"conformance.plugin.ConformanceFailure"}


def _modules(package: ModuleType) -> list[str]:
    names = [package.__name__]
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        last = info.name.rsplit(".", 1)[-1]
        if last == "__main__" or info.name.startswith("conformance.reference"):
            continue  # __main__ runs its CLI on import; the reference has its own root
        names.append(info.name)
    return names


@pytest.mark.parametrize("name", sorted(ROOTS))
def test_every_exception_class_derives_from_its_package_root(name: str) -> None:
    package, root = ROOTS[name]
    found, stray = [], []
    for module_name in _modules(package):
        module = importlib.import_module(module_name)
        for obj in vars(module).values():
            if not (isinstance(obj, type) and issubclass(obj, BaseException)):
                continue
            if obj.__module__ != module_name:
                continue  # imported, judged where it is defined
            qualified = f"{module_name}.{obj.__qualname__}"
            found.append(qualified)
            if not issubclass(obj, root) and qualified not in OUTSIDE:
                stray.append(qualified)
    assert stray == [], f"not under {root.__name__}: {stray}"
    assert f"{root.__module__}.{root.__qualname__}" in found


def test_roots_keep_the_builtin_bases_callers_catch() -> None:
    # Classes that predate the roots keep their old base: `except ValueError` still works.
    from conformance.adapters.guard import GuardError
    from conformance.adapters.shipped import ProfileError
    from conformance.expectations import ExpectationsError
    from reports.errors import ResultsError, ScreenshotError

    assert issubclass(ExpectationsError, ValueError) and issubclass(ProfileError, ValueError)
    assert issubclass(ResultsError, ValueError)
    assert issubclass(GuardError, RuntimeError) and issubclass(ScreenshotError, RuntimeError)
