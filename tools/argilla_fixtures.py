# mypy: ignore-errors
# (runs only in Argilla's own venv, which the project's type check does not have)
"""Check a workbench export with Argilla's own client and make the records-export fixtures the
tests read, with that client (argilla 2.8.0, pinned in tools/argilla/requirements.txt).

Argilla's client is too heavy for the project's venv, so it lives in its own (``make
argilla-env`` makes .argilla-venv from tools/argilla/requirements.txt)::

    .argilla-venv/bin/python tools/argilla_fixtures.py EXPORT OUT

The committed fixtures were made with ``EXPORT`` = tests/labels/data/argilla/export and
``OUT`` = tests/labels/data/argilla (remove nested/ and the records_* files first: the client's
to_disk refuses to overwrite).

``EXPORT`` is a folder written by ``review.labels.argilla_io.export_dir`` (the committed one is
the demo's family FAM-EDU-DISCOUNT, see tests/labels/test_argilla_export.py). The script

1. loads it with ``rg.Dataset.from_disk`` (settings validated, dataset created, records logged)
   and checks the fields, questions, metadata and records against the files;
2. gives the records responses from two annotators (submitted, draft and discarded) and
   suggestions, with the client's ``rg.Record``, ``rg.Response`` and ``rg.Suggestion``, logs
   them, and writes them back as the client exports them: ``Dataset.to_disk`` (``nested/``:
   the records.json whose responses carry no status) and ``records.to_list(flatten=True)``
   (``records_flat.json``, with each response's status) and ``records.to_datasets().to_json``
   (``records_hf.jsonl``: the Hugging Face export that ``to_hub`` pushes, as JSON Lines).

A live Argilla server needs Elasticsearch or OpenSearch, which these machines do not run, so
the client talks to :class:`StandIn`, an in-memory stand-in for the handful of REST endpoints
``from_disk``, ``records.log`` and the record listing call (through httpx's MockTransport,
never the network). Everything the files go through on the client's side is the client's own
code: Settings/Record validation, ingestion, the API models and the exporters.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import argilla as rg
import httpx

NS = uuid.UUID("8b8d2d52-6b1e-4f4b-9d0e-4f1c1a9a0c32")
ALICE = uuid.uuid5(NS, "alice")
BOB = uuid.uuid5(NS, "bob")
OWNER = {"id": str(uuid.uuid5(NS, "owner")), "username": "owner", "role": "owner"}
WORKSPACE = {
    "id": str(uuid.uuid5(NS, "workspace")),
    "name": "argilla",
    "inserted_at": "2026-01-01T00:00:00",
    "updated_at": "2026-01-01T00:00:00",
}
NOW = "2026-01-01T00:00:00"


class StandIn:
    """The REST endpoints of an Argilla 2.x server the client calls here, kept in memory."""

    def __init__(self) -> None:
        self.datasets: dict[str, dict[str, Any]] = {}
        self.props: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self.records: dict[str, dict[str, dict[str, Any]]] = {}
        self.calls: list[str] = []

    def _id(self, *parts: str) -> str:
        return str(uuid.uuid5(NS, "/".join(parts)))

    def __call__(self, req: httpx.Request) -> httpx.Response:
        path = req.url.path
        self.calls.append(f"{req.method} {path}")
        body = json.loads(req.content) if req.content else None
        m = re.fullmatch(r"/api/v1/(?:me/)?datasets/([^/]+)/([a-z-]+)(/bulk)?", path)
        if path == "/api/v1/me":
            return httpx.Response(200, json=OWNER)
        if path == "/api/v1/me/workspaces":
            return httpx.Response(200, json={"items": [WORKSPACE]})
        if path == f"/api/v1/workspaces/{WORKSPACE['id']}":
            return httpx.Response(200, json=WORKSPACE)
        if path == "/api/v1/me/datasets":
            return httpx.Response(200, json={"items": list(self.datasets.values())})
        if path == "/api/v1/datasets" and req.method == "POST":
            ds = {**body, "id": self._id("dataset", body["name"]), "inserted_at": NOW}
            ds["updated_at"] = NOW
            self.datasets[ds["id"]] = ds
            self.props[ds["id"]] = {}
            self.records[ds["id"]] = {}
            return httpx.Response(201, json=ds)
        m_ds = re.fullmatch(r"/api/v1/datasets/([^/]+)(/publish)?", path)
        if m_ds and m_ds.group(1) in self.datasets:
            ds = self.datasets[m_ds.group(1)]
            if m_ds.group(2):
                ds["status"] = "ready"
            elif req.method == "PATCH":
                ds.update(body)
            return httpx.Response(200, json=ds)
        if m and m.group(1) in self.datasets:
            ds_id, kind, bulk = m.groups()
            if kind == "records":
                return self._records(req, ds_id, body, bool(bulk))
            items = self.props[ds_id].setdefault(kind, [])
            if req.method == "POST":
                item = {**body, "id": self._id(ds_id, kind, body["name"]), "dataset_id": ds_id}
                item.update(inserted_at=NOW, updated_at=NOW)
                items.append(item)
                return httpx.Response(201, json=item)
            return httpx.Response(200, json={"items": items})
        raise AssertionError(f"the stand-in does not serve {req.method} {req.url}")

    def _records(self, req: httpx.Request, ds_id: str, body: Any, bulk: bool) -> httpx.Response:
        store = self.records[ds_id]
        if bulk and req.method == "PUT":
            out = []
            for rec in body["items"]:
                key = rec["external_id"]
                rec = {**rec, "id": self._id(ds_id, "record", key), "dataset_id": ds_id}
                rec.update(inserted_at=NOW, updated_at=NOW, status="pending")
                for resp in rec.get("responses") or []:
                    resp.update(id=self._id(key, str(resp["user_id"])), inserted_at=NOW)
                    resp["updated_at"] = NOW
                for sug in rec.get("suggestions") or []:
                    sug.update(id=self._id(key, "suggestion", sug["question_name"]))
                store[key] = rec
                out.append(rec)
            return httpx.Response(200, json={"items": out, "updated_item_ids": []})
        if req.method == "GET":
            offset = int(req.url.params.get("offset", 0))
            limit = int(req.url.params.get("limit", 256))
            items = list(store.values())[offset : offset + limit]
            return httpx.Response(200, json={"items": items, "total": len(store)})
        raise AssertionError(f"the stand-in does not serve {req.method} {req.url}")


def check_export(export: Path, client: rg.Argilla, stand_in: StandIn) -> rg.Dataset:
    """Load the workbench's export with from_disk and check it arrived whole."""
    dataset = rg.Dataset.from_disk(str(export), client=client)
    settings = json.loads((export / ".argilla/settings.json").read_text())
    records = json.loads((export / "records.json").read_text())
    dataset.settings.validate()
    loaded = dataset.settings.serialize()
    for part in ("fields", "questions", "metadata"):
        got = [(p["name"], p["settings"]) for p in loaded[part]]
        want = [(p["name"], p["settings"]) for p in settings[part]]
        assert got == want, (part, got, want)
    assert loaded["distribution"] == settings["distribution"], loaded["distribution"]
    assert loaded["guidelines"] == settings["guidelines"]
    ds_id = str(dataset.id)
    required = {f["name"] for f in settings["fields"] if f["required"]}
    names = {f["name"] for f in settings["fields"]}
    stored = stand_in.records[ds_id]
    assert len(stored) == len(records), (len(stored), len(records))
    for rec in records:
        got = stored[rec["id"]]
        assert got["fields"] == rec["fields"], rec["id"]
        assert required <= set(got["fields"]) <= names, rec["id"]
        meta = got["metadata"]
        assert meta == rec["metadata"], (rec["id"], meta)
    print(f"from_disk: {len(records)} records, settings valid, fields and metadata as written")
    return dataset


HOSTILE = (
    '<img src=x onerror=alert(1)> ![t](http://198.51.100.7/p.png) =HYPERLINK("http://x") '
    "\u202e\x1b[31m"
)


def labeled(dataset: rg.Dataset) -> list[rg.Record]:
    """The records with responses: per record, what each of the two annotators did."""
    plans = [
        # (ALICE, status, decision, reasons, note), (BOB, ...); suggestion
        (
            (
                ALICE,
                "submitted",
                "abstain",
                ["source_not_allowed", "no_answer_bearing_evidence"],
                "only the forbidden doc",
            ),
            (
                BOB,
                "submitted",
                "abstain",
                ["source_not_allowed", "no_answer_bearing_evidence"],
                HOSTILE,
            ),
            ("answer", 0.62),
        ),
        ((ALICE, "submitted", "answer", None, None), (BOB, "draft", "abstain", None, None), None),
        (
            (ALICE, "discarded", None, None, "not sure"),
            (BOB, "submitted", "answer", None, "the FAQ says so"),
            ("abstain", 0.4),
        ),
    ]
    out = []
    for source, plan in zip(dataset.records, plans, strict=False):
        *users, suggestion = plan
        responses = []
        for user, status, decision, reasons, note in users:
            for q, v in (("decision", decision), ("reason_codes", reasons), ("note", note)):
                if v is not None:
                    responses.append(rg.Response(q, v, user_id=user, status=status))
        suggestions = []
        if suggestion is not None:
            suggestions.append(
                rg.Suggestion("decision", suggestion[0], score=suggestion[1], agent="gate-v3")
            )
        out.append(
            rg.Record(
                id=source.id,
                fields=dict(source.fields),
                metadata=dict(source.metadata),
                responses=responses,
                suggestions=suggestions,
            )
        )
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    export, out = Path(argv[0]), Path(argv[1])
    stand_in = StandIn()
    client = rg.Argilla(
        api_url="http://argilla.stand-in",
        api_key="stand-in",
        mounts={"all://": httpx.MockTransport(stand_in)},
    )
    dataset = check_export(export, client, stand_in)
    dataset.records.log(labeled(dataset))
    nested = out / "nested"
    nested.mkdir(parents=True, exist_ok=False)
    dataset.to_disk(str(nested))
    flat = dataset.records.to_list(flatten=True)
    (out / "records_flat.json").write_text(json.dumps(flat, indent=1) + "\n")
    # the Hugging Face export (what to_hub pushes), as datasets writes it: JSON Lines
    dataset.records.to_datasets().to_json(str(out / "records_hf.jsonl"))
    (out / "ARGILLA_VERSION").write_text(rg.__version__ + "\n")
    print(f"wrote {nested} (to_disk), records_flat.json and records_hf.jsonl in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
