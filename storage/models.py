"""Typed SQLAlchemy 2 models.

Rows that people edit carry ``version`` (optimistic concurrency) and ``updated_by``; history
tables (labels, verdicts, sign-offs, audit log) are append-only.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    event,
    select,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from storage import partitions
from storage.inlists import one_of

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Timestamps stored as UTC and always returned timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)

    def process_result_value(
        self, value: dt.datetime | None, dialect: Dialect
    ) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dt.datetime: UTCDateTime(),
        dict[str, Any]: JSON,
        list[Any]: JSON,
    }


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    roles: Mapped[list[Any]] = mapped_column(default=list)
    clearance: Mapped[bool] = mapped_column(Boolean, default=False)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str | None] = mapped_column(String(320))


class Document(Base):
    """One version of a document. Versions of the same document share ``doc_key``."""

    __tablename__ = "documents"
    __table_args__ = (
        UniqueConstraint("doc_key", "version"),
        Index("ix_documents_current", "is_current", "doc_key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    doc_key: Mapped[str] = mapped_column(String(120), index=True)
    version: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(500), index=True)
    body: Mapped[str] = mapped_column(Text)
    effective_date: Mapped[dt.date | None] = mapped_column(Date)
    superseded_by: Mapped[str | None] = mapped_column(String(140))
    authority: Mapped[str] = mapped_column(String(40), index=True)
    owner: Mapped[str] = mapped_column(String(200))
    access_scope: Mapped[str] = mapped_column(String(40), index=True)
    jurisdiction: Mapped[str] = mapped_column(String(40), index=True)
    is_current: Mapped[bool] = mapped_column(Boolean, default=True)
    source: Mapped[str | None] = mapped_column(String(500))
    sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(320))


class CaseFamily(Base):
    __tablename__ = "case_families"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(120), unique=True)
    title: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(320))


class Case(Base):
    __tablename__ = "cases"
    __table_args__ = (
        Index("ix_cases_filter", "status", "expected_decision", "category", "split"),
        # the run form's subset pickers (execution.subset_choices): values of the ready cases
        Index("ix_cases_status_language", "status", "language"),
        Index("ix_cases_status_import_batch", "status", "import_batch"),
        Index("ix_cases_status_family", "status", "family_id"),
        # and the Label queue's filters (review.cases.choices; migration 0037)
        Index("ix_cases_status_category", "status", "category"),
        # with the id and key: the release gate's scope (splits.scope_pairs) is read from it
        # alone (migration 0040)
        Index("ix_cases_status_split", "status", "split", "id", "key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(120), unique=True)
    question: Mapped[str] = mapped_column(Text)
    identity_name: Mapped[str] = mapped_column(String(200))
    identity_scopes: Mapped[list[Any]] = mapped_column(default=list)
    expected_decision: Mapped[str] = mapped_column(String(40))
    #: the wording key (R1, R2, R3, C1, F1, E1, ...) the case expects its answer to use
    expected_message: Mapped[str | None] = mapped_column(String(40))
    reason_codes: Mapped[list[Any]] = mapped_column(default=list)
    category: Mapped[str] = mapped_column(String(60))
    split: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20), default="draft")
    family_id: Mapped[int | None] = mapped_column(
        ForeignKey("case_families.id", ondelete="SET NULL"), index=True
    )
    evidence_state: Mapped[str | None] = mapped_column(String(40))
    #: the question's language as a BCP 47 tag (en, de, pt-BR); None: not stated
    language: Mapped[str | None] = mapped_column(String(35))
    #: the import a case came in with (file and time, or the label given); None: made here
    import_batch: Mapped[str | None] = mapped_column(String(200), index=True)
    notes: Mapped[str] = mapped_column(Text, default="")
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(320))
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str | None] = mapped_column(String(320))

    family: Mapped[CaseFamily | None] = relationship()
    claims: Mapped[list[CaseClaim]] = relationship(
        order_by="CaseClaim.position", cascade="all, delete-orphan"
    )
    documents: Mapped[list[CaseDocument]] = relationship(
        order_by="CaseDocument.position", cascade="all, delete-orphan"
    )
    slices: Mapped[list[CaseSlice]] = relationship(cascade="all, delete-orphan")


class CaseClaim(Base):
    __tablename__ = "case_claims"

    id: Mapped[int] = mapped_column(primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    #: the kind of fact the claim states (a taxonomy claim_kinds key, which the policy's
    #: freshness rules may name); None: not given
    kind: Mapped[str | None] = mapped_column(String(60), nullable=True, default=None)


class CaseDocument(Base):
    __tablename__ = "case_documents"
    __table_args__ = (UniqueConstraint("case_id", "document_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"), index=True)
    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="RESTRICT"), index=True
    )
    position: Mapped[int] = mapped_column(Integer)
    visibility: Mapped[str] = mapped_column(String(20))
    role: Mapped[str] = mapped_column(String(20))

    document: Mapped[Document] = relationship()


class CaseSlice(Base):
    __tablename__ = "case_slices"
    __table_args__ = (Index("ix_case_slices_slice", "slice", "case_id"),)

    case_id: Mapped[int] = mapped_column(
        ForeignKey("cases.id", ondelete="CASCADE"), primary_key=True
    )
    slice: Mapped[str] = mapped_column(String(60), primary_key=True)


class AuditLog(Base):
    """Every change: who, when, what entity, before and after. Append-only."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_entity", "entity", "entity_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(320))
    action: Mapped[str] = mapped_column(String(40))
    entity: Mapped[str] = mapped_column(String(60))
    entity_id: Mapped[str] = mapped_column(String(120))
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Counter(Base):
    """A named counter; used by the concurrency self-check and for sequence-like keys."""

    __tablename__ = "counters"

    name: Mapped[str] = mapped_column(String(120), primary_key=True)
    value: Mapped[int] = mapped_column(Integer, default=0)
    version: Mapped[int] = mapped_column(Integer, default=1)


# --- labeling (append-only history) ----------------------------------------------------


class Label(Base):
    """One annotator's label of a case. Append-only: an edit is a new row pointing at the
    row it replaces; the current label of (case, annotator) is the newest row."""

    __tablename__ = "labels"
    __table_args__ = (
        Index("ix_labels_case_annotator", "case_id", "annotator", "id"),
        Index("ix_labels_source_ref", "source", "source_ref", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"))
    annotator: Mapped[str] = mapped_column(String(320), index=True)
    decision: Mapped[str] = mapped_column(String(40))
    reason_codes: Mapped[list[Any]] = mapped_column(default=list)
    category: Mapped[str | None] = mapped_column(String(60))
    rationale: Mapped[str] = mapped_column(Text, default="")
    claim_verdicts: Mapped[list[Any]] = mapped_column(default=list)
    replaces_id: Mapped[int | None] = mapped_column(ForeignKey("labels.id", ondelete="SET NULL"))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    #: where the label was made: "workbench" (the Labeling page), or the labeling tool whose
    #: export brought it in (review.labels.external.TOOLS)
    source: Mapped[str] = mapped_column(String(20), default="workbench", server_default="workbench")
    #: the tool's id of the annotation (review.labels.external.ExternalLabel.ref); None here
    source_ref: Mapped[str | None] = mapped_column(String(300))
    #: what the imported annotation said, hashed (ExternalLabel.digest): an annotation exported
    #: again with the same digest adds nothing; another digest is a new label
    source_digest: Mapped[str | None] = mapped_column(String(32))
    import_id: Mapped[int | None] = mapped_column(
        ForeignKey("label_imports.id", ondelete="RESTRICT"), index=True
    )
    #: when the annotator made it in the tool (UTC), if its export says; created_at is when the
    #: workbench stored it
    labeled_at: Mapped[dt.datetime | None] = mapped_column()
    #: seconds the annotator spent on it, if the tool says (Label Studio's lead_time)
    lead_seconds: Mapped[float | None] = mapped_column(Float)


class LabelImport(Base):
    """One file of labels made in another labeling tool, imported whole (review.labels.imports):
    who imported which file (its name and sha256), from which tool, with what user mapping,
    and what it added. Labels it wrote name it (labels.import_id)."""

    __tablename__ = "label_imports"

    id: Mapped[int] = mapped_column(primary_key=True)
    tool: Mapped[str] = mapped_column(String(20))
    file_name: Mapped[str] = mapped_column(String(500))
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    imported_by: Mapped[str] = mapped_column(String(320))
    imported_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    #: tool user -> workbench e-mail, as given for this file
    users: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    added: Mapped[int] = mapped_column(Integer, default=0)
    changed: Mapped[int] = mapped_column(Integer, default=0)
    unchanged: Mapped[int] = mapped_column(Integer, default=0)
    #: what the reader passed over, by why (cancelled, draft, prediction, ...)
    skipped: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Reservation(Base):
    """A case opened for labeling is held for one annotator until ``expires_at``."""

    __tablename__ = "reservations"
    __table_args__ = (UniqueConstraint("case_id", "annotator"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"))
    annotator: Mapped[str] = mapped_column(String(320))
    expires_at: Mapped[dt.datetime] = mapped_column(index=True)


class Adjudication(Base):
    """The gold label set by an adjudicator. Append-only; the newest row per case is gold."""

    __tablename__ = "adjudications"
    __table_args__ = (Index("ix_adjudications_case", "case_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"))
    adjudicator: Mapped[str] = mapped_column(String(320))
    decision: Mapped[str] = mapped_column(String(40))
    reason_codes: Mapped[list[Any]] = mapped_column(default=list)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class CaseAgreed(Base):
    """The agreed label of a case (review.cases.agreed), stored: the case's latest
    adjudication, else the label two or more of its current labels agree on. Kept in step with
    ``labels`` and ``adjudications`` in the transaction that writes them (under the case lock);
    bulk loaders rebuild it (review.cases.agreed.rebuild_agreed). No row: no agreed label."""

    __tablename__ = "case_agreed"

    case_id: Mapped[int] = mapped_column(
        ForeignKey("cases.id", ondelete="CASCADE"), primary_key=True
    )
    decision: Mapped[str] = mapped_column(String(40))
    reason_codes: Mapped[list[Any]] = mapped_column(default=list)
    #: "adjudication" or "annotators"
    agreed_by: Mapped[str] = mapped_column(String(20))
    #: the adjudication (agreed_by "adjudication") or the newest agreeing label it comes from
    source_id: Mapped[int] = mapped_column(Integer)


class AgreementPair(Base):
    """The annotator-pair rollup of the Agreement page (review.labels.agreement_rollup), per
    scope (``""``: every current label; a filter's, review.cases.agreement_counts): on how
    many cases both annotators have a current label in it, annotator_a's saying
    ``decision_a`` and annotator_b's ``decision_b`` (annotator_a < annotator_b in code-point
    order). Kept in step
    with ``labels`` by the labeling service in the transaction that adds a label; bulk loaders
    rebuild it. No row: no such case."""

    __tablename__ = "agreement_pairs"

    scope: Mapped[str] = mapped_column(Text, primary_key=True, server_default="")
    annotator_a: Mapped[str] = mapped_column(String(320), primary_key=True)
    annotator_b: Mapped[str] = mapped_column(String(320), primary_key=True)
    decision_a: Mapped[str] = mapped_column(String(40), primary_key=True)
    decision_b: Mapped[str] = mapped_column(String(40), primary_key=True)
    cases: Mapped[int] = mapped_column(Integer)


class AgreementPairCode(Base):
    """Per annotator pair and reason code, over the cases both annotators labelled (current
    labels): on how many both labels have the code, annotator_a's has it, annotator_b's has
    it. Kept as ``agreement_pairs`` is; no row: all three are 0."""

    __tablename__ = "agreement_pair_codes"

    scope: Mapped[str] = mapped_column(Text, primary_key=True, server_default="")
    annotator_a: Mapped[str] = mapped_column(String(320), primary_key=True)
    annotator_b: Mapped[str] = mapped_column(String(320), primary_key=True)
    code: Mapped[str] = mapped_column(Text, primary_key=True)
    both: Mapped[int] = mapped_column(Integer)
    in_a: Mapped[int] = mapped_column(Integer)
    in_b: Mapped[int] = mapped_column(Integer)


class AgreementItemValue(Base):
    """Per label count m and value (a decision, field "decision"; a reason code, field
    "code"), over the cases with m current labels: the labels with that value (the sum over
    those cases of the per-case count) and the sum of the squares of the per-case counts. Kept
    as ``agreement_pairs`` is; no row: both are 0."""

    __tablename__ = "agreement_item_values"

    scope: Mapped[str] = mapped_column(Text, primary_key=True, server_default="")
    m: Mapped[int] = mapped_column(Integer, primary_key=True)
    field: Mapped[str] = mapped_column(String(20), primary_key=True)
    value: Mapped[str] = mapped_column(Text, primary_key=True)
    labels: Mapped[int] = mapped_column(Integer)
    squares: Mapped[int] = mapped_column(BigInteger)


class AgreementGroupValue(Base):
    """Per group of cases (``kind`` "slice" with a slice's name, or "category" with a
    category), label count m and decision, over the group's cases with m current labels: the
    labels with that decision and the sum of the squares of the per-case counts (the Agreement
    page's table by slice or by category; review.cases.agreement_groups). No row: both are 0."""

    __tablename__ = "agreement_group_values"

    scope: Mapped[str] = mapped_column(Text, primary_key=True, server_default="")
    kind: Mapped[str] = mapped_column(String(20), primary_key=True)
    grp: Mapped[str] = mapped_column(String(60), primary_key=True)
    m: Mapped[int] = mapped_column(Integer, primary_key=True)
    decision: Mapped[str] = mapped_column(String(40), primary_key=True)
    labels: Mapped[int] = mapped_column(BigInteger)
    squares: Mapped[int] = mapped_column(BigInteger)


class AgreementGroupAnnotator(Base):
    """Per group of cases (as ``agreement_group_values``) and annotator: on how many of the
    group's cases the annotator has a current label. No row: none."""

    __tablename__ = "agreement_group_annotators"

    scope: Mapped[str] = mapped_column(Text, primary_key=True, server_default="")
    kind: Mapped[str] = mapped_column(String(20), primary_key=True)
    grp: Mapped[str] = mapped_column(String(60), primary_key=True)
    annotator: Mapped[str] = mapped_column(String(320), primary_key=True)
    cases: Mapped[int] = mapped_column(BigInteger)


class AgreementRollupStamp(Base):
    """The label rows the agreement rollup (the three tables above) stands for (one row, id
    1): their number and the newest id. A reader uses the rollup only while these equal the
    labels table's own (a label written past the labeling service leaves them behind until a
    rebuild). No row stands for no label (0 and 0)."""

    __tablename__ = "agreement_rollup_stamp"

    id: Mapped[int] = mapped_column(primary_key=True)
    labels: Mapped[int] = mapped_column(Integer)
    newest_label_id: Mapped[int] = mapped_column(Integer)


class Setting(Base):
    """Small workbench settings people change (label overlap, reservation minutes, ...)."""

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(120), primary_key=True)
    value: Mapped[dict[str, Any]] = mapped_column(JSON)
    version: Mapped[int] = mapped_column(Integer, default=1)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str | None] = mapped_column(String(320))


# --- policies and sign-off (append-only, hash-chained) ----------------------------------


class PolicyVersion(Base):
    """One version of a signed policy file (no-answer thresholds or refusal wording)."""

    __tablename__ = "policy_versions"
    __table_args__ = (UniqueConstraint("kind", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(40))
    number: Mapped[int] = mapped_column(Integer)
    yaml_text: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("policy_versions.id"))
    author: Mapped[str] = mapped_column(String(320))
    rationale: Mapped[str] = mapped_column(Text, default="")
    tuned_on_split: Mapped[str | None] = mapped_column(String(20))
    override_note: Mapped[str | None] = mapped_column(Text)
    snapshot: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class SignOff(Base):
    """A signature on a policy version. Append-only and hash-chained across all rows."""

    __tablename__ = "signoffs"
    __table_args__ = (Index("ix_signoffs_policy", "policy_version_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    policy_version_id: Mapped[int] = mapped_column(ForeignKey("policy_versions.id"))
    signer: Mapped[str] = mapped_column(String(320))
    role: Mapped[str] = mapped_column(String(40))
    meaning: Mapped[str] = mapped_column(String(20))
    note: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    policy_sha256: Mapped[str] = mapped_column(String(64))
    data_fingerprint: Mapped[str] = mapped_column(String(64))
    metrics_snapshot: Mapped[dict[str, Any]] = mapped_column(JSON)
    prev_hash: Mapped[str] = mapped_column(String(64))
    row_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # 1: the row hash covers the signature's own fields (rows signed before revision 0016);
    # 2: also the signed version's kind, number, parent, author, sha256 and required roles
    chain_format: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # "sha256", or "hmac-sha256:<key id>" for a row hashed with the deployment's signing key
    hash_alg: Mapped[str] = mapped_column(String(80), default="sha256", server_default="sha256")


class SplitLock(Base):
    """Cases whose split a threshold sign-off relied on: their split is frozen."""

    __tablename__ = "split_locks"

    case_id: Mapped[int] = mapped_column(
        ForeignKey("cases.id", ondelete="CASCADE"), primary_key=True
    )
    signoff_id: Mapped[int] = mapped_column(ForeignKey("signoffs.id"))


# --- evaluation runs ---------------------------------------------------------------------


class EvalRun(Base):
    __tablename__ = "eval_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    system_version: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(40))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(320))


class EvalOutput(Base):
    __tablename__ = "eval_outputs"
    __table_args__ = (
        UniqueConstraint("run_id", "case_id", "repeat"),
        Index("ix_eval_outputs_case", "case_id", "run_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("eval_runs.id", ondelete="CASCADE"))
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"))
    repeat: Mapped[int] = mapped_column(Integer, default=0)
    decision: Mapped[str | None] = mapped_column(String(40))
    reason_code: Mapped[str | None] = mapped_column(String(60))
    #: the wording key the output's text used (None: the pipeline did not say)
    message_key: Mapped[str | None] = mapped_column(String(40))
    score: Mapped[float | None] = mapped_column()
    ranking_mode: Mapped[str | None] = mapped_column(String(40))
    text: Mapped[str] = mapped_column(Text, default="")
    cited_doc_ids: Mapped[list[Any]] = mapped_column(default=list)
    infra_error: Mapped[str | None] = mapped_column(Text)
    versions: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: the gate's inputs as the pipeline logged them (None: not logged); see evalruns.SignalsIn
    signals: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)


class EvalPerturbedOutput(Base):
    """The pipeline's answer to a perturbed copy of a case's input (a metamorphic check),
    linked to the output it is compared with: same run, case and repeat. ``perturbation``
    records exactly what changed (the new document order, or the added distractor's text)."""

    __tablename__ = "eval_perturbed_outputs"
    __table_args__ = (UniqueConstraint("output_id", "kind"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    output_id: Mapped[int] = mapped_column(ForeignKey("eval_outputs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(40))
    perturbation: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    decision: Mapped[str | None] = mapped_column(String(40))
    reason_code: Mapped[str | None] = mapped_column(String(60))
    score: Mapped[float | None] = mapped_column()
    text: Mapped[str] = mapped_column(Text, default="")
    cited_doc_ids: Mapped[list[Any]] = mapped_column(default=list)
    infra_error: Mapped[str | None] = mapped_column(Text)


class JudgeLabel(Base):
    """An LLM judge's label of one output of a run: the decision the case called for, its
    reason codes, and whether the output was acceptable (each optional). Compared with the
    experts' agreed label of the case."""

    __tablename__ = "judge_labels"
    __table_args__ = (
        UniqueConstraint("run_id", "case_id", "repeat", "judge"),
        Index("ix_judge_labels_run", "run_id", "judge"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("eval_runs.id", ondelete="CASCADE"))
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"))
    repeat: Mapped[int] = mapped_column(Integer)
    judge: Mapped[str] = mapped_column(String(200))
    decision: Mapped[str | None] = mapped_column(String(40))
    reason_codes: Mapped[list[Any]] = mapped_column(default=list)
    output_acceptable: Mapped[bool | None] = mapped_column(Boolean)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(320))


# --- production traces -------------------------------------------------------------------


class TraceImport(Base):
    __tablename__ = "trace_imports"

    id: Mapped[int] = mapped_column(primary_key=True)
    source: Mapped[str] = mapped_column(String(500))
    format: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(20), default="running")
    added: Mapped[int] = mapped_column(Integer, default=0)
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    rejected: Mapped[int] = mapped_column(Integer, default=0)
    redactions: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    rejects_file: Mapped[str | None] = mapped_column(String(500))
    message: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(320))
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column()


#: Traces whose final text is a refusal, follow-up, escalation, partial or caveat: the rows
#: the wording check lints (review.wording.production), kept in a small partial index. Queries
#: must use this exact text (inline constants) for the database to use the index.
#: the decisions whose final text is a refusal, follow-up, escalation, partial or caveat
#: (also a condition on ``trace_population_groups``, which has both columns)
REFUSAL_DECISIONS_WHERE = (
    "((decision IS NOT NULL AND decision != 'answer') OR "
    "(decision = 'answer' AND reason_code IS NOT NULL AND reason_code != 'false_premise'))"
)
#: ... with a text to lint (review.wording.production; the partial ``ix_traces_refusal_texts``)
REFUSAL_TEXTS_WHERE = "answer_text != '' AND " + REFUSAL_DECISIONS_WHERE
#: ... without one (the partial ``ix_traces_empty_refusals``, migration 0038): few traces
EMPTY_REFUSALS_WHERE = "answer_text = '' AND " + REFUSAL_DECISIONS_WHERE


#: bits of a trace's sampling key: keys lie in [0, 2**62), so a key plus any offset below
#: 2**62 stays inside a signed 64-bit integer on both databases
SAMPLE_KEY_BITS = 62


def trace_sample_key(trace_id: str) -> int:
    """The stored sampling key of a trace (``traces.sample_key``): a uniform 62-bit hash of
    its trace id (BLAKE2b, personalised), the same on every database and in every writer.
    Audit draws of plans of algorithm 2 (review.audits.plans) rank a stratum by this key
    rotated by a seed-derived offset, so a draw reads an index range, not every row."""
    digest = hashlib.blake2b(
        trace_id.encode("utf-8"), digest_size=8, person=b"aw-sample-key"
    ).digest()
    return int.from_bytes(digest, "big") >> (64 - SAMPLE_KEY_BITS)


#: the columns of ``ix_traces_sampling``: the key first (an audit draw reads a key range),
#: then the usual audit strata and filters (a count of any strata of them reads the index)
SAMPLING_INDEX_COLUMNS = (
    "sample_key",
    "decision",
    "reason_code",
    "feedback",
    "customer_tier",
    "language",
    "document_type",
    "restricted",
    "at",
)


#: the columns ``ix_traces_top_score`` holds beside the score on PostgreSQL: what the replay
#: reads of each trace of a score bin (review.thresholds.replay._SIGNAL_COLUMNS)
REPLAY_INCLUDE = (
    "id",
    "topics",
    "ranking_mode",
    "hits_after_filter",
    "answerable",
    "ambiguous",
    "ungrounded",
    "customer_tier",
    "restricted",
)


def _sample_key_default(context: DefaultExecutionContext) -> int | None:
    params: dict[str, Any] = context.get_current_parameters()  # type: ignore[no-untyped-call]
    trace_id = params.get("trace_id")
    return None if trace_id is None else trace_sample_key(str(trace_id))


class Trace(Base):
    """One production request, in the canonical trace schema (see review.traces.formats)."""

    __tablename__ = "traces"
    __table_args__ = (
        Index("ix_traces_at_decision", "at", "decision"),
        Index("ix_traces_decision_reason", "decision", "reason_code"),
        Index("ix_traces_restricted_at", "restricted", "at"),
        # the replay's reads of single score bins (trace_signal_groups, migration 0022); on
        # PostgreSQL it holds every column the replay reads, so a bin is read from the index
        # alone (migration 0042)
        Index("ix_traces_top_score", "top_score", postgresql_include=list(REPLAY_INCLUDE)),
        Index(
            "ix_traces_refusal_texts",
            "id",
            "restricted",
            sqlite_where=text(REFUSAL_TEXTS_WHERE),
            postgresql_where=text(REFUSAL_TEXTS_WHERE),
        ),
        # the production check counts its candidates as the groups of refusal decisions
        # less these (review.wording.production.candidate_population)
        Index(
            "ix_traces_empty_refusals",
            "id",
            "restricted",
            sqlite_where=text(EMPTY_REFUSALS_WHERE),
            postgresql_where=text(EMPTY_REFUSALS_WHERE),
        ),
        Index(
            "ix_traces_signals",
            "at",
            "decision",
            "reason_code",
            "hits_after_filter",
            "ungrounded",
            "feedback",
        ),
        # audit plans (review.audits.plans, algorithm 2) draw a key range and count any
        # strata of these columns from this index instead of the wide rows
        Index("ix_traces_sampling", *SAMPLING_INDEX_COLUMNS, postgresql_include=["id"]),
        # the Traces page's filters (migration 0019): newest first and counts from the index
        *(
            Index(name, column, "at", "restricted")
            for name, column in (
                ("ix_traces_decision_at", "decision"),
                ("ix_traces_reason_at", "reason_code"),
                ("ix_traces_ranking_mode_at", "ranking_mode"),
                ("ix_traces_model_at", "model_version"),
                ("ix_traces_policy_at", "policy_version"),
                ("ix_traces_language_at", "language"),
                ("ix_traces_tier_at", "customer_tier"),
                ("ix_traces_doctype_at", "document_type"),
                ("ix_traces_user_role_at", "user_role"),
            )
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(200), unique=True)
    at: Mapped[dt.datetime] = mapped_column(index=True)
    query: Mapped[str] = mapped_column(Text, default="")
    rewritten_query: Mapped[str | None] = mapped_column(Text)
    user_role: Mapped[str | None] = mapped_column(String(120))
    identity_scopes: Mapped[list[Any]] = mapped_column(default=list)
    context_sent: Mapped[str] = mapped_column(Text, default="")
    ranking_mode: Mapped[str | None] = mapped_column(String(40))
    hits_after_filter: Mapped[int | None] = mapped_column(Integer)
    top_score: Mapped[float | None] = mapped_column()
    answerable: Mapped[bool | None] = mapped_column(Boolean)
    ambiguous: Mapped[bool | None] = mapped_column(Boolean)
    ungrounded: Mapped[bool | None] = mapped_column(Boolean)
    # the question's topic keys from the topic classifier ([]: none; NULL: not classified)
    topics: Mapped[list[Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    decision: Mapped[str | None] = mapped_column(String(40))
    reason_code: Mapped[str | None] = mapped_column(String(60))
    answer_text: Mapped[str] = mapped_column(Text, default="")
    citations: Mapped[list[Any]] = mapped_column(default=list)
    feedback: Mapped[str | None] = mapped_column(String(60), index=True)
    # interaction after the response: NULL when the client does not log it
    reformulated: Mapped[bool | None] = mapped_column(Boolean)
    citation_opened: Mapped[bool | None] = mapped_column(Boolean)
    versions: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    policy_version: Mapped[str | None] = mapped_column(String(200))
    model_version: Mapped[str | None] = mapped_column(String(200))
    language: Mapped[str | None] = mapped_column(String(20))
    customer_tier: Mapped[str | None] = mapped_column(String(60))
    document_type: Mapped[str | None] = mapped_column(String(60))
    restricted: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    # a person's mark (review.corpus.restricted_traces): "restricted" (always restricted),
    # "cleared" (the unknown-document reason lifted), NULL (none)
    restricted_mark: Mapped[str | None] = mapped_column(String(20))
    redactions: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    import_id: Mapped[int | None] = mapped_column(
        ForeignKey("trace_imports.id", ondelete="SET NULL"), index=True
    )
    imported_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # trace_sample_key(trace_id), filled on insert (writers that bypass the ORM set it)
    sample_key: Mapped[int | None] = mapped_column(BigInteger, default=_sample_key_default)


#: A trace's top score is counted in the bin ``floor(top_score * SCORE_BIN_SCALE)`` of
#: :class:`TraceSignalGroup` (a power of two: the product is exact, so a bin is exactly the
#: scores ``bin / SCALE <= s < (bin + 1) / SCALE``); scores of SCORE_BIN_LIMIT or more in size
#: are not binned (migration 0022 holds the same figures).
SCORE_BIN_SCALE = 256
SCORE_BIN_LIMIT = 1e15
#: ``TraceSignalGroup.score_kind``: no score logged, a binned number, anything else
SCORE_NONE, SCORE_BINNED, SCORE_OTHER = 0, 1, 2


class TraceSignalGroup(Base):
    """The traces counted by the values the gate reads (migration 0022): the exact ranking
    mode, hits, flags and topics (JSON text), the customer tier, and the top score's bin. Kept in
    step with ``traces`` by triggers on both engines, whoever writes the traces; read by the
    replay of a proposed policy (review.thresholds.replay)."""

    __tablename__ = "trace_signal_groups"

    k: Mapped[str] = mapped_column(Text, primary_key=True)
    ranking_mode: Mapped[str | None] = mapped_column(String(40))
    hits_after_filter: Mapped[int | None] = mapped_column(Integer)
    score_kind: Mapped[int] = mapped_column(SmallInteger)
    score_bin: Mapped[int | None] = mapped_column(BigInteger)
    answerable: Mapped[bool | None] = mapped_column(Boolean)
    ambiguous: Mapped[bool | None] = mapped_column(Boolean)
    ungrounded: Mapped[bool | None] = mapped_column(Boolean)
    topics: Mapped[str | None] = mapped_column(Text)
    customer_tier: Mapped[str | None] = mapped_column(String(60))
    n: Mapped[int] = mapped_column(BigInteger)


class TracePopulationGroup(Base):
    """The traces alike in UTC day and the audit columns, with the terms of an audit plan's
    population count (storage.population_groups, migration 0035): kept in step with
    ``traces`` by triggers on both engines; ``stale`` when a deleted trace was the group's
    smallest or largest id (its ``min_id``/``max_id`` may no longer be exact)."""

    __tablename__ = "trace_population_groups"

    k: Mapped[str] = mapped_column(Text, primary_key=True)
    day: Mapped[dt.date] = mapped_column(Date, index=True)
    decision: Mapped[str | None] = mapped_column(String(40))
    reason_code: Mapped[str | None] = mapped_column(String(60))
    feedback: Mapped[str | None] = mapped_column(String(60))
    customer_tier: Mapped[str | None] = mapped_column(String(60))
    language: Mapped[str | None] = mapped_column(String(20))
    restricted: Mapped[bool] = mapped_column(Boolean)
    n: Mapped[int] = mapped_column(BigInteger)
    id_sum: Mapped[int] = mapped_column(BigInteger)
    key_sum: Mapped[int] = mapped_column(BigInteger)
    unkeyed: Mapped[int] = mapped_column(BigInteger)
    min_id: Mapped[int] = mapped_column(BigInteger)
    max_id: Mapped[int] = mapped_column(BigInteger)
    stale: Mapped[bool] = mapped_column(Boolean)


class TraceRollup(Base):
    """Daily counts of the weekly monitoring signals, kept in step with ``traces`` by the
    import and the purge (review.traces.rollup). One row per (segment, UTC day, decision): ``dim``
    and ``value`` are empty for all traces, else a segment (``language``, ``version.index``,
    ...) and one of its values; ``decision`` is empty for traces without one."""

    __tablename__ = "trace_rollup"

    dim: Mapped[str] = mapped_column(String(40), primary_key=True)
    value: Mapped[str] = mapped_column(String(200), primary_key=True)
    day: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    decision: Mapped[str] = mapped_column(String(40), primary_key=True)
    traces: Mapped[int] = mapped_column(Integer, default=0)
    caveat: Mapped[int] = mapped_column(Integer, default=0)
    empty_retrieval: Mapped[int] = mapped_column(Integer, default=0)
    ungrounded: Mapped[int] = mapped_column(Integer, default=0)
    negative_feedback: Mapped[int] = mapped_column(Integer, default=0)
    missing_reason: Mapped[int] = mapped_column(Integer, default=0)
    #: traces that log whether the user reformulated, and those that did
    reformulation_logged: Mapped[int] = mapped_column(Integer, default=0)
    reformulated: Mapped[int] = mapped_column(Integer, default=0)
    #: traces that log whether a cited source was opened, and those where one was
    citation_logged: Mapped[int] = mapped_column(Integer, default=0)
    citation_opened: Mapped[int] = mapped_column(Integer, default=0)


class TraceChunk(Base):
    __tablename__ = "trace_chunks"

    id: Mapped[int] = mapped_column(primary_key=True)
    trace_pk: Mapped[int] = mapped_column(ForeignKey("traces.id", ondelete="CASCADE"), index=True)
    # the trace's ``at``: the month key of the chunks' partitions on PostgreSQL (migration
    # 0036, storage.partitions); every writer sets it
    trace_at: Mapped[dt.datetime] = mapped_column()
    chunk_id: Mapped[str] = mapped_column(String(300))
    doc_id: Mapped[str | None] = mapped_column(String(120), index=True)
    doc_version: Mapped[int | None] = mapped_column(Integer)
    rank: Mapped[int | None] = mapped_column(Integer)
    score: Mapped[float | None] = mapped_column()
    text: Mapped[str] = mapped_column(Text, default="")
    filtered: Mapped[bool] = mapped_column(Boolean, default=False)
    effective_date: Mapped[dt.date | None] = mapped_column(Date)


# --- audit sampling and verdicts ---------------------------------------------------------


class SamplingPlan(Base):
    __tablename__ = "sampling_plans"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    population_filter: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    strata: Mapped[list[Any]] = mapped_column(default=list)
    allocation: Mapped[str] = mapped_column(String(20))
    explicit_sizes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    total: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    population: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    fingerprint: Mapped[str] = mapped_column(String(100))
    overlap: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(String(20), default="open")
    created_by: Mapped[str] = mapped_column(String(320))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class AuditItem(Base):
    __tablename__ = "audit_items"
    __table_args__ = (UniqueConstraint("plan_id", "trace_pk"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    plan_id: Mapped[int] = mapped_column(
        ForeignKey("sampling_plans.id", ondelete="CASCADE"), index=True
    )
    trace_pk: Mapped[int] = mapped_column(ForeignKey("traces.id", ondelete="CASCADE"), index=True)
    stratum: Mapped[str] = mapped_column(String(300))
    position: Mapped[int] = mapped_column(Integer)
    reserved_by: Mapped[str | None] = mapped_column(String(320))
    reserved_until: Mapped[dt.datetime | None] = mapped_column()


class AuditVerdict(Base):
    """A reviewer's verdict on an audit item. Append-only; the newest per reviewer counts."""

    __tablename__ = "audit_verdicts"
    __table_args__ = (Index("ix_audit_verdicts_item_reviewer", "item_id", "reviewer", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("audit_items.id", ondelete="CASCADE"))
    reviewer: Mapped[str] = mapped_column(String(320))
    verdict: Mapped[str] = mapped_column(String(40))
    stages: Mapped[list[Any]] = mapped_column(default=list)
    notes: Mapped[str] = mapped_column(Text, default="")
    claims: Mapped[list[Any]] = mapped_column(default=list)
    replaces_id: Mapped[int | None] = mapped_column(
        ForeignKey("audit_verdicts.id", ondelete="SET NULL")
    )
    promoted_case_id: Mapped[int | None] = mapped_column(
        ForeignKey("cases.id", ondelete="SET NULL")
    )
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


# --- case builder provenance -------------------------------------------------------------


class CaseEdit(Base):
    """A recorded controlled edit: which operator made which derived document or case."""

    __tablename__ = "case_edits"

    id: Mapped[int] = mapped_column(primary_key=True)
    case_id: Mapped[int | None] = mapped_column(
        ForeignKey("cases.id", ondelete="CASCADE"), index=True
    )
    document_id: Mapped[int | None] = mapped_column(
        ForeignKey("documents.id", ondelete="SET NULL"), index=True
    )
    operator: Mapped[str] = mapped_column(String(60))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    source_doc_key: Mapped[str] = mapped_column(String(120))
    source_version: Mapped[int] = mapped_column(Integer)
    span_start: Mapped[int] = mapped_column(Integer)
    span_end: Mapped[int] = mapped_column(Integer)
    before: Mapped[str] = mapped_column(Text)
    after: Mapped[str] = mapped_column(Text)
    record: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    author: Mapped[str] = mapped_column(String(320))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # the rows of one edit of several documents share it (one action in history); None: alone
    edit_group: Mapped[str | None] = mapped_column(String(32), index=True)


class CaseSuggestion(Base):
    """An operator's suggested label, kept apart from labels until an expert confirms it."""

    __tablename__ = "case_suggestions"

    case_id: Mapped[int] = mapped_column(
        ForeignKey("cases.id", ondelete="CASCADE"), primary_key=True
    )
    decision: Mapped[str] = mapped_column(String(40))
    reason_codes: Mapped[list[Any]] = mapped_column(default=list)
    source: Mapped[str] = mapped_column(String(120))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    confirmed_by: Mapped[str | None] = mapped_column(String(320))
    confirmed_at: Mapped[dt.datetime | None] = mapped_column()


# --- monthly review ----------------------------------------------------------------------


class ReviewSession(Base):
    __tablename__ = "review_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    month: Mapped[str] = mapped_column(String(7), unique=True)
    status: Mapped[str] = mapped_column(String(20), default="open")
    attendees: Mapped[list[Any]] = mapped_column(default=list)
    validation: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    summary: Mapped[str] = mapped_column(Text, default="")
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(320))
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str | None] = mapped_column(String(320))
    closed_at: Mapped[dt.datetime | None] = mapped_column()
    closed_by: Mapped[str | None] = mapped_column(String(320))
    #: the month as it was reviewed, frozen at closing (tables and charts; see
    #: review.monthly.reviews)
    record: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class ReviewFinding(Base):
    __tablename__ = "review_findings"

    id: Mapped[int] = mapped_column(primary_key=True)
    session_id: Mapped[int] = mapped_column(
        ForeignKey("review_sessions.id", ondelete="CASCADE"), index=True
    )
    text: Mapped[str] = mapped_column(Text)
    severity: Mapped[str] = mapped_column(String(20))
    links: Mapped[list[Any]] = mapped_column(default=list)
    carried_from_id: Mapped[int | None] = mapped_column(
        ForeignKey("review_findings.id", ondelete="SET NULL")
    )
    created_by: Mapped[str] = mapped_column(String(320))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class ReviewAction(Base):
    __tablename__ = "review_actions"

    id: Mapped[int] = mapped_column(primary_key=True)
    session_id: Mapped[int] = mapped_column(
        ForeignKey("review_sessions.id", ondelete="CASCADE"), index=True
    )
    text: Mapped[str] = mapped_column(Text)
    owner_role: Mapped[str] = mapped_column(String(40))
    due_date: Mapped[dt.date | None] = mapped_column(Date)
    status: Mapped[str] = mapped_column(String(20), default="open")
    created_by: Mapped[str] = mapped_column(String(320))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


# --- live trace sources (issue 31) --------------------------------------------------------


class TraceSource(Base):
    """A place traces arrive from while the workbench runs: a Phoenix project it syncs from
    (``kind`` phoenix) or the OTLP/HTTP receiver (``kind`` otlp). The secret (an API key or
    bearer token) is never stored: ``secret_name`` names the environment variable or the
    ``.streamlit/secrets.toml`` key that holds it."""

    __tablename__ = "trace_sources"
    __table_args__ = (UniqueConstraint("kind", "url", "project"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(200), unique=True)
    url: Mapped[str] = mapped_column(String(500), default="")
    project: Mapped[str] = mapped_column(String(200), default="")
    secret_name: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20), default="active")
    grace_seconds: Mapped[float] = mapped_column(default=30.0)
    #: where the next sync starts (Phoenix's cursor, opaque) and what it has read so far
    cursor: Mapped[str | None] = mapped_column(String(500))
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    last_sync_at: Mapped[dt.datetime | None] = mapped_column()
    last_success_at: Mapped[dt.datetime | None] = mapped_column()
    #: the start time of the newest span read: how far behind the source the workbench is
    newest_span_at: Mapped[dt.datetime | None] = mapped_column()
    last_error: Mapped[str | None] = mapped_column(Text)
    last_error_at: Mapped[dt.datetime | None] = mapped_column()
    spans_read: Mapped[int] = mapped_column(BigInteger, default=0)
    traces_added: Mapped[int] = mapped_column(BigInteger, default=0)
    traces_rejected: Mapped[int] = mapped_column(BigInteger, default=0)
    late_spans: Mapped[int] = mapped_column(BigInteger, default=0)
    created_by: Mapped[str] = mapped_column(String(320))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class SourceSpan(Base):
    """One span received from a source, held until its trace is complete (``waiting``), then
    ``imported`` (its OTLP entry dropped; the row keeps the span id, so a re-read span is
    known and a root span can be annotated), ``late`` (arrived after its trace was imported)
    or ``rejected`` (its trace was refused; ``reason`` says why)."""

    __tablename__ = "source_spans"
    __table_args__ = (
        UniqueConstraint("source_id", "trace_id", "span_id"),
        Index("ix_source_spans_waiting", "source_id", "state", "trace_id"),
        Index("ix_source_spans_trace", "trace_id", "parent_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    source_id: Mapped[int] = mapped_column(ForeignKey("trace_sources.id", ondelete="CASCADE"))
    trace_id: Mapped[str] = mapped_column(String(32))
    span_id: Mapped[str] = mapped_column(String(16))
    parent_id: Mapped[str | None] = mapped_column(String(16))
    start_at: Mapped[dt.datetime] = mapped_column()
    received_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    state: Mapped[str] = mapped_column(String(12), default="waiting")
    #: the span's OTLP/JSON ``resourceSpans`` entry as compact JSON text, while it waits
    entry: Mapped[str | None] = mapped_column(Text)
    #: a digest of what the span said (its entry, or why it was refused): sent again, a span
    #: must say the same
    digest: Mapped[str | None] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)


# --- verdicts pushed back to a trace store (issue 31 item 3) ------------------------------


class ReceiverRequests(Base):
    """What an OTLP/HTTP receiver answered, per source and HTTP status: requests, the spans
    of the accepted ones (status 200), and the last request's time. The receiver counts in
    memory and adds its counts every few seconds (review.traces.live.tally), so a busy
    receiver writes a few rows, not one per request."""

    __tablename__ = "receiver_requests"

    source_id: Mapped[int] = mapped_column(
        ForeignKey("trace_sources.id", ondelete="CASCADE"), primary_key=True
    )
    status: Mapped[int] = mapped_column(Integer, primary_key=True)
    requests: Mapped[int] = mapped_column(BigInteger, default=0)
    spans: Mapped[int] = mapped_column(BigInteger, default=0)
    last_at: Mapped[dt.datetime | None] = mapped_column()


class VerdictPush(Base):
    """What the workbench wrote back to a Phoenix source as one span annotation: one row per
    (source, audit item, reviewer, annotation name), e.g. ``workbench.verdict`` or
    ``workbench.claim.2`` on the trace's root span. ``pushed_*`` say what Phoenix acknowledged
    last (its digest: an annotation already there is not sent again; a newer verdict's differs
    and is sent as the new value); ``error``/``failed_at`` say why the last attempt failed
    (kept until a later push succeeds). Written only by review.traces.live.push."""

    __tablename__ = "verdict_pushes"
    __table_args__ = (UniqueConstraint("source_id", "item_id", "reviewer", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    source_id: Mapped[int] = mapped_column(
        ForeignKey("trace_sources.id", ondelete="CASCADE"), index=True
    )
    item_id: Mapped[int] = mapped_column(
        ForeignKey("audit_items.id", ondelete="CASCADE"), index=True
    )
    reviewer: Mapped[str] = mapped_column(String(320))
    name: Mapped[str] = mapped_column(String(200))
    span_id: Mapped[str] = mapped_column(String(16))
    #: the verdict row the value was taken from (the newest of the reviewer when pushed)
    verdict_id: Mapped[int | None] = mapped_column(
        ForeignKey("audit_verdicts.id", ondelete="SET NULL")
    )
    label: Mapped[str | None] = mapped_column(String(200))
    pushed_digest: Mapped[str | None] = mapped_column(String(64))
    pushed_at: Mapped[dt.datetime | None] = mapped_column()
    #: Phoenix's id of the annotation (its GlobalID)
    phoenix_id: Mapped[str | None] = mapped_column(String(200))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    failed_at: Mapped[dt.datetime | None] = mapped_column()


# --- background jobs (issue 33 item 2) ------------------------------------------------------


class Job(Base):
    """One piece of background work (a trace import, a rebuild, an export, ...), run by a
    ``workbench worker`` on any machine or, on one machine, in the page that started it
    (review.jobs). ``status`` moves queued -> running -> done | failed | cancelled; a running
    job whose lease passed (its worker died) is claimed again by another worker, up to
    ``max_attempts``. ``attempts`` is also the fencing token: a worker writes progress and the
    outcome only while the row still carries its attempt and its name."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_status_run_after", "status", "run_after"),
        Index("ix_jobs_kind_id", "kind", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(60))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(12), default="queued")
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    #: a queued job is not claimed before this (a retry's back-off)
    run_after: Mapped[dt.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column()
    finished_at: Mapped[dt.datetime | None] = mapped_column()
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    worker: Mapped[str | None] = mapped_column(String(200))
    lease_until: Mapped[dt.datetime | None] = mapped_column()
    done: Mapped[int] = mapped_column(BigInteger, default=0)
    total: Mapped[int | None] = mapped_column(BigInteger)
    note: Mapped[str] = mapped_column(String(500), default="")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    cancelled_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(Text)


class JobFile(Base):
    """A file a job reads (``role`` "input": an uploaded trace file) or writes ("output":
    rejected lines, an export), in chunks of at most 4 MiB, so that every server and worker
    reads it from the database. Inputs are dropped when the job finishes."""

    __tablename__ = "job_files"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    role: Mapped[str] = mapped_column(String(8), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    mime: Mapped[str] = mapped_column(String(100), default="application/octet-stream")
    data: Mapped[bytes] = mapped_column(LargeBinary)


class JobWorker(Base):
    """A ``workbench worker`` process: its name (host:pid), when it started and its last
    heartbeat, so the pages can say whether a queued job will be picked up."""

    __tablename__ = "job_workers"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    seen_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    #: the job it runs now, if any
    job_id: Mapped[int | None] = mapped_column(Integer)


class UserDraft(Base):
    """A person's unsaved work (issue 33): the wording they are editing, the claim rows of an
    audit verdict, threshold sliders not yet proposed; one row per user and draft key, so any
    server shows it when the page opens. ``version`` counts the saves: a save based on an
    older version (a stale tab) is refused, never written over a newer one."""

    __tablename__ = "drafts"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(120), primary_key=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


# --- monthly partitions (storage.partitions) ---------------------------------------------


@event.listens_for(Session, "before_flush")
def _trace_months(session: Session, flush_context: object, instances: object) -> None:
    """An ORM flush of new traces makes their months' partitions first (PostgreSQL), and a new
    chunk without ``trace_at`` gets its stored trace's ``at`` (the bulk writers set both
    themselves: review.traces.tracerows)."""
    traces = [o for o in session.new if isinstance(o, Trace)]
    chunks = [o for o in session.new if isinstance(o, TraceChunk) and o.trace_at is None]
    if not traces and not chunks:
        return
    conn = session.connection()
    if traces:
        partitions.ensure_months(conn, [t.at for t in traces])
    if chunks:
        pks = {c.trace_pk for c in chunks}
        found = conn.execute(select(Trace.id, Trace.at).where(one_of(conn, Trace.id, pks)))
        ats = {int(pk): at for pk, at in found}
        for c in chunks:
            if c.trace_pk in ats:
                c.trace_at = ats[c.trace_pk]
