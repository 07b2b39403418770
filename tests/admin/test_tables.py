"""The Admin page's tables: users with their roles, and changes with their snapshots cut."""

from __future__ import annotations

import datetime as dt

from review.admin import changelog, users


def test_users_table_joins_roles_and_keeps_every_user() -> None:
    people = [
        users.UserView(1, "a@x.example", "Ada", ("admin", "annotator"), True, True, 3),
        users.UserView(2, "b@x.example", "Bo", (), False, False, 1),
    ]
    frame = users.users_frame(people)
    assert frame.to_dict("records") == [
        {"name": "Ada", "email": "a@x.example", "roles": "Admin, Annotator", "clearance": True,
         "active": True, "version": 3},
        {"name": "Bo", "email": "b@x.example", "roles": "", "clearance": False, "active": False,
         "version": 1},
    ]  # fmt: skip
    assert list(users.users_frame([]).columns) == list(frame.columns)


def test_change_log_table_cuts_long_snapshots_and_leaves_missing_ones_empty() -> None:
    at = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
    big = {"body": "é" * 2000}
    rows = [
        changelog.AuditRow(1, at, "ada", "create", "document", "7", None, big),
        changelog.AuditRow(2, at, "ada", "update", "case", "3", {"v": 1}, {"v": 2}),
    ]
    frame = changelog.entries_frame(rows)
    assert frame["before"].tolist() == ["", '{"v": 1}']
    assert len(frame["after"][0]) == changelog.SNAPSHOT_CHARS and "é" in frame["after"][0]
    assert frame[["who", "action", "entity", "id"]].values.tolist()[1] == [
        "ada",
        "update",
        "Case",
        "3",
    ]
    assert frame["when"].tolist()[0] == "2025-06-01 00:00 UTC"  # a date, not a timestamp
    mailed = [changelog.AuditRow(3, at, "ada.admin@x.example", "create", "case", "4", None, None)]
    named = changelog.entries_frame(mailed, {"ada.admin@x.example": "Ada Admin"})
    assert named["who"].tolist() == ["Ada Admin"]
