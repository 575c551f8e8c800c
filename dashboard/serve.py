"""The dashboard's process (`costgate dashboard` runs `python -m dashboard.serve run app.py ...`).

Streamlit's own command line, with one thing first: the heavy third-party imports
(`dashboard.prewarm.import_at_start`: pandas, SQLAlchemy, Plotly), before Streamlit
serves anything, so that they are done by the time someone signs in instead of
competing with that first page's run for the machine, and are never imported by a
thread beside a script run.
"""

from __future__ import annotations


def main() -> None:
    from dashboard import prewarm

    prewarm.import_at_start()
    from streamlit.web import cli

    cli.main(prog_name="streamlit")  # reads sys.argv[1:], as `python -m streamlit` does


if __name__ == "__main__":
    main()
