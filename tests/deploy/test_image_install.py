"""The image's install step, run for real on exactly the files the Dockerfile copies.

No Docker engine runs here, so the build context is rebuilt by hand from the Dockerfile's
COPY lines, and `pip wheel` (what `pip install .` does first) builds the project from it.
A file the running gateway needs but the wheel lacks would be missing from the image.
"""

import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.deploy.repo_files import DOCKERFILE, ROOT

# needed only to write new migrations, never at run time
NOT_SHIPPED = {"db/migrations/script.py.mako"}


def _copied_sources() -> list[str]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    sources = []
    for line in text.splitlines():
        if line.startswith("COPY "):
            *srcs, dest = shlex.split(line[len("COPY ") :])
            if not dest.startswith("/etc/"):  # the example config: not part of the install
                sources += srcs
    return sources


def _tracked(prefix: str) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", prefix], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def test_the_wheel_built_from_the_image_context_holds_everything_the_gateway_runs(tmp_path):
    context = tmp_path / "context"
    context.mkdir()
    for src in _copied_sources():
        path = ROOT / src
        if path.is_dir():
            shutil.copytree(path, context / src, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, context / src)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(context),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = tmp_path.glob("costgate-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    needed = {
        f for pkg in ("gateway", "db", "dashboard") for f in _tracked(pkg) if f not in NOT_SHIPPED
    }
    assert needed - names == set()
    entry_points = (
        zipfile.ZipFile(wheel)
        .read(next(n for n in names if n.endswith("entry_points.txt")))
        .decode()
    )
    assert "costgate = gateway.cli.main:main" in entry_points
    assert Path(ROOT / "config" / "costgate.example.yaml").exists()
