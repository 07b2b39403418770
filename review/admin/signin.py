"""Who is acting: the decisions of the router (app.py), kept here so unit tests reach them.

Local mode (no identity provider) trusts whoever can open the app, so it is made for one
machine: the server listens on the loopback address unless the deployment opens it, and
then every page says so. A new session acts as nobody until a person picks their name; a
link that names a user (``?as=ID``) is honoured only while that user is active, and
anything else in it is refused, never replaced by some other user. A link never changes who
is acting: when it names someone other than the user this session (or, in a new session, this
browser) acts as, the person is asked "Continue as ...?" first.

With an identity provider the email must be one the provider verified (the OIDC
``email_verified`` claim); a provider that verifies every address but does not send the
claim is trusted only when the deployment says so.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from review.core.errors import PermissionDenied


@dataclass(frozen=True)
class LocalChoice:
    """The user a local-mode session acts as, or why it acts as nobody yet.

    ``confirm`` is a user a link named who is not the one acting (in this session, or last in
    this browser: ``instead_of``): the router asks "Continue as ...?" before switching, and
    until the person answers the session acts as ``user_id`` (nobody in a new session)."""

    user_id: int | None
    #: shown above the user picker when the link named a user that cannot act
    refused: str | None = None
    #: the user the link names, awaiting the person's yes
    confirm: int | None = None
    #: who was acting when the link asked to switch (this session's user, or this browser's)
    instead_of: int | None = None


def _requested_user(requested: str, active_ids: Collection[int]) -> int | str:
    """The active user ``requested`` names, or why it names none."""
    if not (requested.isascii() and requested.isdigit()) or len(requested) > 10:
        return "The link names a user that does not exist here. Pick who you are."
    wanted = int(requested)
    if wanted not in active_ids:
        return (
            f"The link names user {wanted}, who is not an active user of this workbench "
            "(unknown or deactivated). Pick who you are."
        )
    return wanted


def remembered_user(cookie: object, active_ids: Collection[int]) -> int | None:
    """The active user this browser last acted as (the ``REMEMBER_COOKIE`` value), or None
    for a missing, malformed (not text, included), unknown or deactivated one."""
    if not isinstance(cookie, str) or len(cookie) > 10:
        return None
    if not (cookie.isascii() and cookie.isdigit()):
        return None
    user = int(cookie)
    return user if user in active_ids else None


#: The cookie in which the browser remembers whom it last acted as in local mode (a session
#: cookie: it ends with the browser). It never picks a user on its own; it only lets a link
#: that names someone else be asked about instead of obeyed.
REMEMBER_COOKIE = "wb_acting"


def local_choice(
    requested: str | None,
    session_user: int | None,
    active_ids: Collection[int],
    remembered: int | None = None,
) -> LocalChoice:
    """Whom a local-mode session acts as.

    ``session_user`` is the user this browser session picked before (kept while that user
    stays active); ``requested`` is the ``as`` value of the link that opened it;
    ``remembered`` the active user this browser last acted as (another tab, or before a
    reload). With no user named, nobody: the person picks their name first. A link never
    changes who is acting: one naming someone other than the session's user, or, in a new
    session, than the browser's last user, is asked about (``confirm``), never obeyed. A link
    naming an unknown, deactivated or malformed user is refused with the reason."""
    current = session_user if session_user is not None and session_user in active_ids else None
    if current is not None:
        if not requested:
            return LocalChoice(current)
        wanted = _requested_user(requested, active_ids)
        if isinstance(wanted, int) and wanted != current:
            return LocalChoice(current, confirm=wanted, instead_of=current)
        return LocalChoice(current)
    if requested is None or requested == "":
        if session_user is not None:
            return LocalChoice(
                None, "The user this session acted as is no longer active here. Pick who you are."
            )
        return LocalChoice(None)
    wanted = _requested_user(requested, active_ids)
    if isinstance(wanted, str):
        return LocalChoice(None, wanted)
    if remembered is not None and remembered in active_ids and remembered != wanted:
        return LocalChoice(None, confirm=wanted, instead_of=remembered)
    return LocalChoice(wanted)


_TRUE = ("true", "1", "yes")


def verified_email(claims: Mapping[str, object], *, provider_verifies_email: bool = False) -> str:
    """The signed-in person's email from the provider's claims, refused unless verified.

    ``email_verified`` true (a boolean, or the text "true" some providers send) is accepted;
    false is always refused; a missing claim is refused unless ``provider_verifies_email``
    (the deployment's word that its provider only issues verified addresses)."""
    email = str(claims.get("email") or "").strip()
    if not email:
        raise PermissionDenied(
            "The identity provider did not send an email address, so no workbench user can be "
            "matched. Ask the administrator to add the 'email' scope."
        )
    flag = claims.get("email_verified")
    if flag is None:
        if provider_verifies_email:
            return email
        raise PermissionDenied(
            "The identity provider did not say that this email address is verified "
            "(no email_verified claim), so it is not accepted. If the provider only issues "
            "verified addresses, the administrator can set provider_verifies_email."
        )
    if flag is True or (isinstance(flag, str) and flag.strip().lower() in _TRUE):
        return email
    raise PermissionDenied(
        "This email address is not verified by the identity provider, so it is not accepted. "
        "Verify it with the provider, then sign in again."
    )


def network_open(address: str | None) -> bool:
    """Whether a server told to listen on ``address`` can be reached from other machines.

    Unset or empty means every interface (Streamlit's own default), as do 0.0.0.0 and ::."""
    if address is None or not address.strip():
        return True
    host = address.strip().strip("[]")
    if host.lower() == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a host name other than localhost resolves to some interface


#: headers a reverse proxy adds to the requests it passes on (haproxy's and nginx's
#: ``X-Forwarded-For``, RFC 7239's ``Forwarded``)
PROXY_HEADERS = ("x-forwarded-for", "forwarded")


def through_proxy(headers: Mapping[str, str]) -> bool:
    """Whether the browser's request came through a reverse proxy (deploy/haproxy.cfg adds
    ``X-Forwarded-For``): a server listening on the loopback address is then reachable by
    whoever reaches the proxy, so local mode is as open as on a network address."""
    return any(str(name).lower() in PROXY_HEADERS for name in headers)
