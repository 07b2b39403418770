"""Start the workbench: ``python serve.py [streamlit options]`` is ``streamlit run app.py``
with the router in charge of every address from the first request of the process.

Why not plain ``streamlit run app.py``: Streamlit decides, when the first session of a process
starts, that an app with a folder named ``pages/`` beside its entry script is an old-style
"pages folder" app (``PagesManager.uses_pages_directory``), and it keeps routing every run
through that old router until some run has called ``st.navigation``. The old router knows
only the files of ``pages/`` under their file names (``cases_page``), so on a freshly started
server the first request for a deep link such as ``/cases?case=7`` is answered with
Streamlit's "Page not found" dialog before app.py has run at all (app.py then opens the
right page underneath the dialog). Every later request of the process is fine, because
app.py's ``st.navigation`` switches the old router off for good.

With ``WORKBENCH_RECEIVE_PORT`` set (``make run RECEIVE=4318``) it also starts the OTLP/HTTP
trace receiver beside the app, as a supervised child process (``workbench receive``) that stops
when the app stops: see :mod:`review.traces.live.beside`.

This launcher switches it off before the server starts, so app.py's ``st.navigation`` (the
page table in app.py, identity check included) answers every address from the first request
on. ``make run`` and the browser tests start the app this way.
"""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"


def use_router_only() -> None:
    """Tell Streamlit that the app routes through ``st.navigation`` (not a pages/ folder)."""
    from streamlit.runtime.pages_manager import PagesManager

    if not hasattr(PagesManager, "uses_pages_directory"):
        raise SystemExit(
            "This Streamlit version no longer has PagesManager.uses_pages_directory; "
            "check serve.py against its pages manager before starting the workbench."
        )
    PagesManager.uses_pages_directory = False


def main(args: list[str]) -> None:
    from streamlit.web import cli

    from review.core.errors import InputError
    from review.traces.live import beside

    use_router_only()
    try:
        receiver = beside.start_from_env(cwd=str(APP.parent))
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None
    sys.argv = ["streamlit", "run", str(APP), *args]
    try:
        cli.main(prog_name="streamlit")
    finally:
        if receiver is not None:
            receiver.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
