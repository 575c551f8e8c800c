"""The dashboard's process (`costgate dashboard` runs `python -m dashboard.serve run app.py ...`).

Streamlit's own command line, with one thing first: the warm-up of imports and a first
connection (`dashboard.prewarm.start_with_process`) starts with the process, not when
the first browser asks for the sign-in page, so that it is done by the time someone
signs in instead of competing with that first page's run for the machine.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def main() -> None:
    from dashboard import prewarm
    from dashboard.settings import load_settings

    try:
        url = load_settings().database_url
    except Exception as err:  # noqa: BLE001 - app.py reports a bad setting on the page
        log.warning("dashboard warm-up not started: %s", type(err).__name__)
    else:
        prewarm.start_with_process(url)
    from streamlit.web import cli

    cli.main(prog_name="streamlit")  # reads sys.argv[1:], as `python -m streamlit` does


if __name__ == "__main__":
    main()
