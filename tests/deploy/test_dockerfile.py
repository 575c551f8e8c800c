import re
import shlex
import tomllib

from tests.deploy.repo_files import DOCKERFILE, ROOT


def _instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def _pip_installs(command: str) -> list[list[str]]:
    """The arguments of every `pip install` in a shell command line."""
    installs = []
    for part in re.split(r"&&|;|\n", command):
        words = shlex.split(part)
        for i, w in enumerate(words):
            if w.endswith("pip") and words[i + 1 : i + 2] == ["install"]:
                installs.append([a for a in words[i + 2 :] if not a.startswith("--quiet")])
    return installs


def test_every_file_the_dockerfile_copies_exists_and_is_in_the_build_context():
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    copies = [rest for op, rest in _instructions() if op == "COPY"]
    assert copies
    for rest in copies:
        *sources, _dest = shlex.split(rest)
        for src in sources:
            assert not src.startswith("--"), "no COPY --from: one stage"
            assert (ROOT / src).exists(), f"COPY {src}: no such file in the repository"
            assert src.rstrip("/") not in ignored, f"COPY {src}: excluded by .dockerignore"


def test_the_image_has_the_python_the_project_requires():
    base = next(rest for op, rest in _instructions() if op == "FROM")
    version = re.match(r"python:(\d+\.\d+)", base).group(1)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"].startswith(f">={version}")
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^PY \?= python{re.escape(version)}$", makefile, re.M)


def test_the_image_installs_the_project_like_the_readme_quick_start():
    # The README's quick start is `make demo`, whose install step is the Makefile's pip
    # install of this project; the image installs the same project (not editable, and
    # without the test extras).
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")  # continued lines
    theirs = [
        a
        for cmd in makefile.splitlines()
        if not cmd.lstrip().startswith("#")
        for a in _pip_installs(cmd)
        if "--upgrade" not in a
    ]
    ours = [a for op, rest in _instructions() if op == "RUN" for a in _pip_installs(rest)]
    assert len(theirs) == 1 and len(ours) == 1
    (make_args,) = theirs
    (image_args,) = ours
    project = [a for a in make_args if a != "-e"]
    assert [re.sub(r"\[.*\]$", "", a) for a in project] == ["."]
    assert image_args == ["."]
    # the code the install sees is the code the packages list names
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    copied = {shlex.split(rest)[0] for op, rest in _instructions() if op == "COPY"}
    for pattern in packages["packages"]["find"]["include"]:
        assert pattern.rstrip("*") in copied


def test_the_image_runs_costgate_and_exposes_the_ports_compose_uses():
    ops = dict(_instructions())
    assert ops["ENTRYPOINT"] == '["costgate"]'
    exposed = set(ops["EXPOSE"].split())
    assert {"8000", "8265", "8501", "9100"} <= exposed
    assert ops["USER"] == "costgate"
