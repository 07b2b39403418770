"""Who is acting (issue 16, items 11 and 12): the router's decisions as plain functions."""

from __future__ import annotations

import pytest

from review.admin.signin import (
    LocalChoice,
    local_choice,
    network_open,
    remembered_user,
    through_proxy,
    verified_email,
)
from review.core.errors import PermissionDenied

ACTIVE = {3, 5, 8}


def test_a_new_session_acts_as_nobody_until_a_person_picks() -> None:
    choice = local_choice(None, None, ACTIVE)
    assert choice.user_id is None and choice.refused is None
    assert local_choice("", None, ACTIVE).user_id is None


def test_a_link_naming_an_active_user_is_honoured_when_nobody_was_acting() -> None:
    assert local_choice("5", None, ACTIVE) == LocalChoice(5)
    assert local_choice("5", None, ACTIVE, remembered=5) == LocalChoice(5)
    # the browser's last user is gone: nobody to switch from
    assert local_choice("5", None, ACTIVE, remembered=4) == LocalChoice(5)


def test_a_link_naming_someone_else_than_the_acting_user_asks_before_switching() -> None:
    # the session acts as 8; a link (or the address bar) says as=5: 8 keeps acting, 5 is asked
    assert local_choice("5", 8, ACTIVE) == LocalChoice(8, confirm=5, instead_of=8)
    # a reload or a new tab: the session is new, but the browser acted as 3 (an annotator)
    assert local_choice("5", None, ACTIVE, remembered=3) == LocalChoice(
        None, confirm=5, instead_of=3
    )
    # the same user, or no user named: nothing to ask
    assert local_choice("8", 8, ACTIVE) == LocalChoice(8)
    assert local_choice(None, 8, ACTIVE) == LocalChoice(8)
    # a new session without a link still starts on the picker, whoever the browser was
    assert local_choice(None, None, ACTIVE, remembered=3) == LocalChoice(None)


@pytest.mark.parametrize("requested", ["4", "x", "99999999999999999999"])
def test_a_bad_link_never_disturbs_the_acting_user(requested: str) -> None:
    assert local_choice(requested, 8, ACTIVE) == LocalChoice(8)


@pytest.mark.parametrize(
    ("cookie", "user"),
    [("3", 3), ("4", None), ("", None), (None, None), ("3; as=5", None), ("\u0663", None)],
)
def test_the_remembered_user_is_an_active_one_or_none(cookie: str | None, user: int | None) -> None:
    assert remembered_user(cookie, ACTIVE) == user


@pytest.mark.parametrize(
    ("requested", "reason"),
    [
        ("4", "user 4, who is not an active user"),  # unknown or deactivated
        ("99999999999999999999", "does not exist here"),
        ("-1", "does not exist here"),
        ("1 OR 1=1", "does not exist here"),
        ("\u0663", "does not exist here"),  # an Arabic-Indic digit, isdigit() but not ASCII
    ],
)
def test_a_link_naming_anyone_else_is_refused_not_replaced(requested: str, reason: str) -> None:
    choice = local_choice(requested, None, ACTIVE)
    assert choice.user_id is None
    assert choice.refused is not None and reason in choice.refused


def test_a_session_whose_user_was_deactivated_goes_back_to_the_picker() -> None:
    choice = local_choice(None, 4, ACTIVE)
    assert choice.user_id is None
    assert choice.refused is not None and "no longer active" in choice.refused


@pytest.mark.parametrize(
    "claims",
    [
        {"email": "a@example.org", "email_verified": True},
        {"email": "a@example.org", "email_verified": "true"},
        {"email": "a@example.org", "email_verified": "True"},
    ],
)
def test_a_verified_email_is_accepted(claims: dict[str, object]) -> None:
    assert verified_email(claims) == "a@example.org"


@pytest.mark.parametrize(
    ("claims", "trust", "reason"),
    [
        ({"email": "a@example.org", "email_verified": False}, False, "not verified"),
        ({"email": "a@example.org", "email_verified": False}, True, "not verified"),
        ({"email": "a@example.org", "email_verified": "false"}, True, "not verified"),
        ({"email": "a@example.org", "email_verified": "yes please"}, False, "not verified"),
        ({"email": "a@example.org"}, False, "no email_verified claim"),
        ({"email_verified": True}, True, "did not send an email"),
        ({"email": "  ", "email_verified": True}, True, "did not send an email"),
    ],
)
def test_an_unverified_or_missing_email_is_refused(
    claims: dict[str, object], trust: bool, reason: str
) -> None:
    with pytest.raises(PermissionDenied, match=reason):
        verified_email(claims, provider_verifies_email=trust)


def test_a_missing_claim_is_accepted_only_when_the_deployment_trusts_the_provider() -> None:
    assert verified_email({"email": "a@example.org"}, provider_verifies_email=True) == (
        "a@example.org"
    )


@pytest.mark.parametrize(
    ("address", "is_open"),
    [
        ("127.0.0.1", False),
        ("127.0.0.2", False),
        ("localhost", False),
        ("::1", False),
        ("[::1]", False),
        (None, True),
        ("", True),
        ("0.0.0.0", True),
        ("::", True),
        ("192.168.1.20", True),
        ("workbench.example.com", True),
    ],
)
def test_only_loopback_addresses_count_as_closed_to_the_network(
    address: str | None, is_open: bool
) -> None:
    assert network_open(address) is is_open


def test_a_request_through_a_reverse_proxy_counts_as_open_to_the_network() -> None:
    """Behind haproxy (deploy/) the server listens on 127.0.0.1, yet whoever reaches the proxy
    reaches it: the proxy's forwarding header says so, in any case of its name."""
    assert through_proxy({"X-Forwarded-For": "10.0.0.7"})
    assert through_proxy({"forwarded": "for=10.0.0.7"})
    assert not through_proxy({"Host": "127.0.0.1:8501", "User-Agent": "x"})
    assert not through_proxy({})
