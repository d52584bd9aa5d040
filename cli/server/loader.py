"""Load ``app.py`` so that its ``chalicelib`` imports are the installed ``ltm`` modules.

Chalice deploys ``app.py`` next to a ``chalicelib/`` folder; pip installs that
folder as the package ``ltm`` and ships ``app.py`` as a data file. To serve the
very same file, an import alias maps ``chalicelib`` and every
``chalicelib.X`` to ``ltm`` and ``ltm.X``: the same module objects, never a
second copy (so ``chalicelib.store.Store is ltm.store.Store``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import site
import sys
from pathlib import Path
from types import ModuleType

ALIAS = "chalicelib"
REAL = "ltm"


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``chalicelib[.X]`` is ``ltm[.X]``: the import returns the existing module."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != ALIAS and not fullname.startswith(ALIAS + "."):
            return None
        real_name = REAL + fullname[len(ALIAS) :]
        try:
            module = importlib.import_module(real_name)
        except ModuleNotFoundError:
            return None
        return importlib.util.spec_from_loader(
            fullname, self, is_package=hasattr(module, "__path__")
        )

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(REAL + spec.name[len(ALIAS) :])
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has just set __spec__ to the alias's: give the module its own back.
        if module.__name__ in self._specs:
            module.__spec__ = self._specs.pop(module.__name__)


def install_alias() -> None:
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


def find_app_py() -> Path:
    """``app.py`` of this installation: the checkout's, else the installed data file."""
    import ltm

    package_dir = Path(ltm.__file__).resolve().parent
    candidates = []
    if package_dir.name == ALIAS:  # a checkout (editable install): app.py sits beside chalicelib/
        candidates.append(package_dir.parent / "app.py")
    candidates.append(Path(sys.prefix) / "share" / "ltm" / "app.py")
    if site.USER_BASE:
        candidates.append(Path(site.USER_BASE) / "share" / "ltm" / "app.py")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        "cannot find the server's app.py; looked in: " + ", ".join(str(c) for c in candidates)
    )


def load_app(path: Path | None = None) -> ModuleType:
    """Import ``app.py`` (once) as the module ``app`` and return it."""
    existing = sys.modules.get("app")
    if existing is not None and getattr(existing, "app", None) is not None and path is None:
        return existing
    install_alias()
    path = path or find_app_py()
    spec = importlib.util.spec_from_file_location("app", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["app"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("app", None)
        raise
    return module
