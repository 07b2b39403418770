"""The demo company stays in the demo (issue 36): no module of the workbench outside
review/demo/ names it. What is deployment-specific (company names, allowed contacts) is read
from the policy files."""

from __future__ import annotations

from tests.helpers.paths import ROOT

DEMO_COMPANY = "brightwave"


def test_no_module_outside_the_demo_names_the_demo_company() -> None:
    modules = [
        *(ROOT / "review").rglob("*.py"),
        *(ROOT / "pages").rglob("*.py"),
        *(ROOT / "storage").rglob("*.py"),
        ROOT / "app.py",
        ROOT / "serve.py",
    ]
    demo = ROOT / "review" / "demo"
    offenders = sorted(
        str(path.relative_to(ROOT))
        for path in modules
        if not path.is_relative_to(demo)
        and DEMO_COMPANY in path.read_text(encoding="utf-8").casefold()
    )
    assert offenders == []
