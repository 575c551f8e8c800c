"""The dashboard's process (`costgate dashboard` runs `python -m dashboard.serve run app.py ...`).

Streamlit's own command line, with two things first: the heavy third-party imports
(`dashboard.prewarm.import_at_start`: pandas, SQLAlchemy, Plotly), before Streamlit
serves anything, so that they are done by the time someone signs in instead of
competing with that first page's run for the machine, and are never imported by a
thread beside a script run; then what they made is frozen out of the garbage
collector's generations (`prepare`).
"""

from __future__ import annotations

import gc


def prepare() -> None:
    """What the process does before Streamlit serves (see the module's docstring)."""
    from dashboard import prewarm

    prewarm.import_at_start()
    # Streamlit runs a full collection after every script run (runner.postScriptGC):
    # with pandas, Plotly and SQLAlchemy loaded that walked ~180k objects, 0.12 s a run,
    # several runs per sign-in. What the imports made lives as long as the process, so
    # it leaves the collector's generations; the runs' own garbage is still collected.
    gc.collect()
    gc.freeze()


def main() -> None:
    prepare()
    from streamlit.web import cli

    cli.main(prog_name="streamlit")  # reads sys.argv[1:], as `python -m streamlit` does


if __name__ == "__main__":
    main()
