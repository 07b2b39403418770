"""Every kind of job, registered: the worker and the pages import this module so both see
the same kinds (one import per kind's module)."""

from __future__ import annotations

from review.jobs import kinds, maintenance

__all__ = ["kinds", "maintenance"]
