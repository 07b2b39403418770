"""The menu per role, built from app.py's own page table: each person's work first, the pages
they cannot use left out of the menu (but still registered), nothing lost or listed twice."""

from __future__ import annotations

import pytest

from review.admin import navigation
from review.admin.navigation import PageSpec
from review.core.identity import Actor, Permission, Role
from review.traces import browse
from tests.helpers.pages import page_files, page_table

PAGES = page_table()
ALL = {spec.url_path for spec in PAGES}


def _menu(*roles: Role) -> navigation.Menu:
    return navigation.menu(PAGES, roles)


def _first(menu: navigation.Menu) -> list[str]:
    name, specs = menu.sections[0]
    assert name == navigation.MINE  # the person's own pages: no header, cannot be collapsed
    return [spec.url_path for spec in specs]


def test_the_table_read_here_is_the_one_app_py_registers() -> None:
    assert [f"pages/{spec.file}" for spec in PAGES] == page_files()
    assert all(isinstance(spec, PageSpec) for spec in PAGES)


def test_an_annotator_starts_with_label_and_does_not_see_production_or_review_pages() -> None:
    menu = _menu(Role.annotator)
    assert _first(menu) == ["overview", "label"]
    hidden = {spec.url_path for spec in menu.hidden}
    assert hidden == {"admin", "adjudicate", "label-exchange", "traces", "monitoring"}
    assert not hidden & set(menu.listed())


def test_a_reviewer_starts_with_adjudicate_audit_and_the_monthly_review() -> None:
    assert _first(_menu(Role.reviewer)) == ["overview", "adjudicate", "audit", "review"]


def test_a_person_with_two_roles_gets_the_work_of_both_first() -> None:
    assert _first(_menu(Role.annotator, Role.reviewer)) == [
        "overview",
        "label",
        "adjudicate",
        "audit",
        "review",
    ]


@pytest.mark.parametrize("role", [Role.product_owner, Role.compliance])
def test_signers_start_with_thresholds_wording_and_runs(role: Role) -> None:
    menu = _menu(role)
    assert _first(menu) == ["overview", "thresholds", "wording", "runs"]
    assert {spec.url_path for spec in menu.hidden} == {
        "admin",
        "label",
        "adjudicate",
        "label-exchange",
    }
    assert "traces" in menu.listed()


def test_an_administrator_sees_every_page_with_admin_first() -> None:
    menu = _menu(Role.admin)
    assert _first(menu) == ["overview", "admin"]
    assert menu.hidden == ()
    assert sorted(menu.listed()) == sorted(ALL)


@pytest.mark.parametrize(
    "roles",
    [(), *[(r,) for r in Role], (Role.annotator, Role.reviewer), (Role.compliance, Role.admin)],
)
def test_every_page_is_listed_or_hidden_once_and_sections_keep_the_table_order(
    roles: tuple[Role, ...],
) -> None:
    menu = _menu(*roles)
    listed = menu.listed()
    hidden = [spec.url_path for spec in menu.hidden]
    assert sorted(listed + hidden) == sorted(ALL)
    assert listed[0] == "overview"
    table_sections = list(dict.fromkeys(spec.section for spec in PAGES))
    later = [name for name, _ in menu.sections[1:]]
    assert later == [name for name in table_sections if name in later]
    for _, specs in menu.sections[1:]:
        order = [spec.url_path for spec in specs]
        assert order == [s.url_path for s in PAGES if s.url_path in order]


def _actor(*roles: Role) -> Actor:
    return Actor(id=1, email="x@example.com", name="X", roles=frozenset(roles))


@pytest.mark.parametrize("role", [r for r in Role if r is not Role.admin])
def test_a_page_is_hidden_exactly_when_the_page_itself_would_turn_the_person_away(
    role: Role,
) -> None:
    """The menu agrees with the pages' own checks (Label, Adjudicate, Admin by permission;
    Traces and Monitoring by the roles that may see production data)."""
    actor = _actor(role)
    hidden = {spec.url_path for spec in _menu(role).hidden}
    turned_away = {
        "label": not actor.can(Permission.label),
        "adjudicate": not actor.can(Permission.adjudicate),
        "label-exchange": not actor.can(Permission.exchange_labels),
        "admin": not actor.can(Permission.manage_users),
        "traces": not browse.can_view(actor),
        "monitoring": not browse.can_view(actor),
    }
    assert hidden == {page for page, away in turned_away.items() if away}


def test_holders_are_the_roles_granting_the_permission() -> None:
    assert navigation.holders(Permission.label) == {Role.annotator}
    assert navigation.holders(Permission.manage_users) == {Role.admin}


def test_the_page_a_person_is_on_is_listed_even_when_they_cannot_use_it() -> None:
    """Opened by a link, a page outside their roles is in the sidebar while they are on it
    (under its section), and hidden again elsewhere."""
    on_traces = navigation.menu(PAGES, [Role.annotator], current="traces")
    assert "traces" in on_traces.listed()
    assert "traces" not in {spec.url_path for spec in on_traces.hidden}
    assert dict(on_traces.sections)["Production"][0].url_path == "traces"
    assert "traces" not in navigation.menu(PAGES, [Role.annotator], current="label").listed()
    assert _first(on_traces) == ["overview", "label"]
