"""No process is ever stopped by name anywhere in the repository.

On a machine shared by several users and several test sessions, a kill that matches
process names, or Ray's own stop command (which ends every Ray process on the host),
would kill other people's work. Everything the project starts is stopped by the PID it recorded
(`gateway.control.cluster.stop_head`, the fixtures' process groups). This scans every file
git knows of (tracked, and new files not ignored) for those commands, in any form: shell,
Makefile, a Python subprocess argument list.
"""

from __future__ import annotations

import re
import subprocess

from tests.deploy.repo_files import ROOT

# spelled in pieces so that this file does not match itself
_FORBIDDEN = re.compile(
    "|".join(
        [
            r"\bp" + r"kill\b",
            r"\bkill" + r"all\b",
            r"\bpg" + r"rep\b[^\n]*\|\s*xargs\s+kill",
            r"\bray\s+" + r"stop\b",
            # Ray's stop command as a subprocess argument list
            r"""["']ray["']\s*,\s*["']""" + r"""stop["']""",
        ]
    )
)


def _repository_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({name for name in out.split("\0") if name})


def test_the_pattern_catches_each_form() -> None:
    for line in (
        "p" + "kill -f raylet",
        "kill" + "all python",
        "ray " + "stop --force",
        'subprocess.run(["ray", "' + 'stop"])',
        "pg" + "rep -f gcs_server | xargs kill",
    ):
        assert _FORBIDDEN.search(line), line
    assert not _FORBIDDEN.search("os.killpg(proc.pid, signal.SIGTERM)")
    assert not _FORBIDDEN.search("stop_head(paths)  # Ray's own stop command is never used")


def test_no_file_stops_a_process_by_name() -> None:
    files = _repository_files()
    assert len(files) > 50  # the scan saw the repository, not an empty listing
    found = []
    for name in files:
        path = ROOT / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary, or deleted in the work tree but not yet in the index
        for number, line in enumerate(text.splitlines(), 1):
            if _FORBIDDEN.search(line):
                found.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not found, "stop processes by PID, never by name:\n" + "\n".join(found)
