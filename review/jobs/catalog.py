"""Every kind of job, registered: the worker and the pages import this module so both see
the same kinds (one import per kind's module)."""

from __future__ import annotations

from review.jobs import evaluation_run, kinds, live, maintenance, trace_import

__all__ = ["evaluation_run", "kinds", "live", "maintenance", "trace_import"]
