"""Opening a month (issue 17, item 15): a new month is created once; an existing month is
returned as it is, nothing written; a malformed month or a role without reviews is refused."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

from review.core.errors import InputError, PermissionDenied
from review.monthly import reviews
from storage.db import read_session
from storage.models import AuditLog
from tests.helpers.actors import make_actor

RAVI = make_actor("reviewer", "ravi.menon@brightwave.example")


def audit_rows(engine: Engine) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count()).select_from(AuditLog)) or 0)


def test_open_month_creates_a_new_month_once_and_switches_to_an_existing_one(
    demo_engine: Engine,
) -> None:
    view, created = reviews.open_month(demo_engine, RAVI, "2031-04")
    assert created and view.month == "2031-04" and not view.closed
    logged = audit_rows(demo_engine)
    again, created_again = reviews.open_month(demo_engine, RAVI, "2031-04")
    assert not created_again and again.id == view.id
    assert audit_rows(demo_engine) == logged  # nothing written the second time
    assert [s.month for s in reviews.list_sessions(demo_engine)].count("2031-04") == 1


def test_open_month_refuses_a_malformed_month_and_other_roles(demo_engine: Engine) -> None:
    with pytest.raises(InputError):
        reviews.open_month(demo_engine, RAVI, "April")
    with pytest.raises(PermissionDenied):
        reviews.open_month(demo_engine, make_actor("annotator"), "2031-05")
    assert reviews.get_session(demo_engine, "2031-05") is None
