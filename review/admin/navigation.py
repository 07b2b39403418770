"""The workbench's navigation per person: their own work first, then the rest by section; the
pages they cannot use are left out of the menu but keep their address.

The page table itself is app.py's ``PAGES`` (one :class:`PageSpec` per page); this module
decides, for the roles of the person signed in, what the sidebar lists and in which order.
A page left out of the menu is still registered (hidden), so a link to it opens the page,
which says in one line who uses it, instead of Streamlit's "Page not found".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from review.core import readable
from review.core.identity import GRANTS, Permission, Role

#: The section of the person's own pages: listed first, without a header (so it cannot be
#: collapsed in the sidebar).
MINE = ""

#: The page every menu starts with (the default page of the app).
HOME = "overview"


@dataclass(frozen=True)
class PageSpec:
    """One page of the workbench: where it sits in the menu, its file and address.

    ``work``: the roles whose daily work the page is (listed first for them, in the order of
    the table). ``open_to``: the roles that can use it; empty means everyone. An administrator
    sees every page."""

    section: str
    file: str
    title: str
    icon: str
    url_path: str
    work: frozenset[Role] = frozenset()
    open_to: frozenset[Role] = frozenset()


@dataclass(frozen=True)
class Menu:
    """What the sidebar lists for one person, in order, and the pages it leaves out."""

    sections: tuple[tuple[str, tuple[PageSpec, ...]], ...]
    hidden: tuple[PageSpec, ...]

    def listed(self) -> list[str]:
        """The addresses of the listed pages, top to bottom."""
        return [spec.url_path for _, specs in self.sections for spec in specs]


def holders(permission: Permission) -> frozenset[Role]:
    """The roles that grant ``permission`` (for a page's ``open_to``)."""
    return frozenset(role for role, granted in GRANTS.items() if permission in granted)


def can_use(spec: PageSpec, roles: Iterable[Role]) -> bool:
    held = frozenset(roles)
    return Role.admin in held or not spec.open_to or bool(spec.open_to & held)


def menu(pages: Sequence[PageSpec], roles: Iterable[Role], current: str | None = None) -> Menu:
    """The menu of a person holding ``roles``: first the home page and the pages of their own
    work (no header), then every other page they can use under its section, sections in the
    order of the table; the pages they cannot use are returned apart, to be registered hidden,
    except the page they are on (``current``, its address), which is always listed."""
    held = frozenset(roles)
    usable = [spec for spec in pages if can_use(spec, held) or spec.url_path == current]
    mine = [spec for spec in usable if spec.url_path == HOME]
    mine += [spec for spec in usable if spec.work & held and spec.url_path != HOME]
    sections: dict[str, list[PageSpec]] = {MINE: mine}
    for spec in usable:
        if spec not in mine:
            sections.setdefault(spec.section, []).append(spec)
    hidden = tuple(spec for spec in pages if spec not in usable)
    return Menu(
        sections=tuple((name, tuple(specs)) for name, specs in sections.items() if specs),
        hidden=hidden,
    )


@dataclass(frozen=True)
class NotYours:
    """What a page says to a person whose roles do not let them use it: who can, and what to
    do next; ``admin_link``: the person is an administrator, who can grant the role on the
    Admin page (the page links there)."""

    text: str
    admin_link: bool


#: The people who hold a role, as a sentence names them ("Labeling is for annotators").
ROLE_PEOPLE = {
    Role.annotator: "annotators",
    Role.reviewer: "reviewers",
    Role.product_owner: "product owners",
    Role.compliance: "compliance",
    Role.admin: "administrators",
}


def _either(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def not_yours(
    what: str, roles: Iterable[Role], actor_roles: Iterable[Role], admins: Sequence[str]
) -> NotYours:
    """The one line a page shows to someone it is not for: ``what`` ("Labeling") is for the
    people holding one of ``roles`` (in words, never keys); the person's own roles; and the
    way forward: an administrator gives the role to themselves or a colleague on the Admin
    page, anyone else asks an administrator (``admins``: their names, the first three
    shown)."""
    needed = [ROLE_PEOPLE[r] for r in Role if r in frozenset(roles)] or ["administrators"]
    held = [readable.humanize(r.value).lower() for r in Role if r in frozenset(actor_roles)]
    mine = f"Your roles ({', '.join(held)}) do not include it." if held else "You hold no role."
    which = "that role" if len(needed) == 1 else "one of those roles"
    text = f"{what} is for {_either(needed)}. {mine}"
    if Role.admin in frozenset(actor_roles):
        return NotYours(
            f"{text} As an administrator you can give {which} to yourself or a colleague on "
            "the Admin page.",
            admin_link=True,
        )
    if admins:
        more = f" and {len(admins) - 3:d} more" if len(admins) > 3 else ""
        return NotYours(
            f"{text} Ask an administrator ({', '.join(admins[:3])}{more}) for {which}.", False
        )
    return NotYours(f"{text} Ask an administrator for {which}.", False)
