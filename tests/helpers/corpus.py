"""A valid document in the Markdown import format, for corpus and page tests."""

from __future__ import annotations

GOOD = """---
doc_id: POL-REFUND
version: 2
title: Refund policy
effective_date: 2025-03-01
superseded_by: null
authority: policy
owner: Billing Operations
access_scope: public
jurisdiction: EU
---
# Refund policy

## Monthly plans
Monthly plans can be cancelled within 14 days for a full refund[^1], except when more
than 5 GB of storage was used.

| Plan | Window |
|------|--------|
| Monthly | 14 days |
| Annual | 30 days |

[^1]: Counted from the first invoice date.
"""
