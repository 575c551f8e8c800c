"""The tree stays readable: small folders, modules that fit one sitting, tests that mirror
the packages (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "db", "dashboard", "tests")
MAX_MODULES_PER_FOLDER = 15
MAX_LINES_PER_MODULE = 400


def _folders() -> list[Path]:
    found = []
    for top in PACKAGES:
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]:
            if folder.is_dir() and "__pycache__" not in folder.parts and any(folder.glob("*.py")):
                found.append(folder)
    return found


def test_no_folder_holds_more_than_15_modules():
    # the migrations are a chain that grows by one per schema change, read one at a
    # time by revision, never as a folder of modules (their lengths are not counted
    # either, below)
    crowded = {
        str(f.relative_to(ROOT)): n
        for f in _folders()
        if "migrations" not in f.parts
        and (n := len(list(f.glob("*.py")))) > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def test_no_module_is_longer_than_400_lines():
    long = {}
    for top in ("gateway", "db", "dashboard"):
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            n = len(path.read_text().splitlines())
            if n > MAX_LINES_PER_MODULE:
                long[str(path.relative_to(ROOT))] = n
    assert long == {}


def test_every_gateway_package_has_its_test_folder():
    packages = {p.name for p in (ROOT / "gateway").iterdir() if (p / "__init__.py").exists()}
    tested = {p.name for p in (ROOT / "tests" / "gateway").iterdir() if p.is_dir()}
    assert packages <= tested
