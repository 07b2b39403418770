"""What the demo's users ask: the Brightwave documents cut into passages, the intents behind
the questions (with their decisive and neighbouring passages, answers and claims), the
personal data some people type, and the wording violations planted in some refusals."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache

from review.corpus.docformat import parse_markdown
from review.demo.files import DEMO_DOCS

# ---------------------------------------------------------------------------------------
# The demo documents, cut into passages


@dataclass(frozen=True)
class Passage:
    chunk_id: str
    doc_id: str
    version: int
    text: str
    effective_date: dt.date | None
    access_scope: str


@lru_cache(maxsize=1)
def demo_passages() -> dict[str, list[Passage]]:
    from review.core.taxonomy import taxonomy

    tax = taxonomy()
    out: dict[str, list[Passage]] = {}
    for path in sorted(DEMO_DOCS.glob("*.md")):
        doc = parse_markdown(path.read_text(encoding="utf-8"), path.name, tax)
        paras = [p.strip() for p in doc.body.split("\n\n")]
        kept: list[Passage] = []
        for i, p in enumerate(paras):
            if not p or p.startswith("#"):
                continue
            kept.append(
                Passage(
                    f"{doc.doc_id}@{doc.version}#p{i}",
                    doc.doc_id,
                    doc.version,
                    p,
                    doc.effective_date,
                    doc.access_scope,
                )
            )
        out[f"{doc.doc_id}@{doc.version}"] = kept
    return out


def find_passage(ref: str, needle: str) -> Passage:
    passages = demo_passages()
    for p in passages.get(ref, []):
        if needle in p.text:
            return p
    raise LookupError(f"demo passage not found: {ref} {needle!r}")


# ---------------------------------------------------------------------------------------
# What users ask


@dataclass(frozen=True)
class Intent:
    key: str
    questions: tuple[str, ...]
    rewritten: str
    evidence: tuple[tuple[str, str], ...] = ()  # (doc@version, needle): decisive passages
    neighbours: tuple[tuple[str, str], ...] = ()  # related passages that do not answer
    answer: str = ""
    claims: tuple[tuple[str, int], ...] = ()  # (claim, index into evidence)
    topic: str = "this"
    missing: str = "the plan you are on"
    doc_type: str = "policy"
    restricted_source: tuple[str, str] | None = None  # filtered by authorization
    topic_key: str | None = None  # restricted topic of the policy


ANSWERABLE: tuple[Intent, ...] = (
    Intent(
        "refund_monthly",
        (
            "How many days do we have to ask for a refund of a monthly charge?",
            "Can we still get a refund for last week's charge on our monthly Team plan?",
            "What is the refund window for monthly subscriptions?",
            "We were charged for the Business plan on the 3rd, is it too late for a refund?",
        ),
        "refund window monthly subscription charge",
        evidence=(("POL-REFUND-MONTHLY@2", "2.1 A customer may ask"),),
        neighbours=(("POL-REFUND-ANNUAL@1", "2.1 If a customer cancels"),),
        answer="You can ask for a refund of a monthly charge within 14 days of the charge date.",
        claims=(("A monthly charge can be refunded within 14 days of the charge date.", 0),),
        topic="refunds for monthly plans",
        missing="the date of the charge",
    ),
    Intent(
        "refund_annual_first_term",
        (
            "We started the annual Business plan three weeks ago. Can we cancel and get our "
            "money back?",
            "Is there a cooling-off period for annual subscriptions?",
        ),
        "annual plan first term cancellation refund",
        evidence=(
            ("POL-REFUND-ANNUAL@1", "2.1 If a customer cancels"),
            ("POL-REFUND-ANNUAL@1", "2.2 The 30-day"),
        ),
        neighbours=(("POL-REFUND-MONTHLY@2", "2.1 A customer may ask"),),
        answer=(
            "Yes. If you cancel within 30 days of the start date of your first annual term, the "
            "full annual fee is refunded. The 30 days count from the start date on the first "
            "invoice."
        ),
        claims=(
            ("Cancelling within 30 days of the first annual term's start refunds the full fee.", 0),
            ("The 30 days count from the start date on the first invoice.", 1),
        ),
        topic="refunds for annual plans",
        missing="the start date on your first invoice",
    ),
    Intent(
        "sla_uptime",
        (
            "What uptime does the Enterprise SLA guarantee?",
            "What availability do we get on Enterprise?",
        ),
        "enterprise SLA uptime commitment",
        evidence=(("SLA-ENTERPRISE@2", "Brightwave commits that the core services"),),
        neighbours=(("SLA-ENTERPRISE@1", "availab"),),
        answer=(
            "The Enterprise SLA commits to at least 99.95% availability of the core services in "
            "each calendar month."
        ),
        claims=(("Enterprise core services are available at least 99.95% of each month.", 0),),
        topic="service levels",
        missing="your order form's SLA version",
        doc_type="contract",
    ),
    Intent(
        "sla_claim_deadline",
        (
            "How long do we have to claim SLA credits after a bad month?",
            "Is it too late to claim a service credit for the outage in March?",
        ),
        "SLA service credit claim deadline",
        evidence=(("SLA-ENTERPRISE@2", "Claims must be submitted within"),),
        neighbours=(("SLA-CREDIT-PROCESS@1", "credit"),),
        answer=(
            "Credit claims must be submitted within 45 days after the end of the affected month."
        ),
        claims=(("SLA credit claims are due within 45 days after the affected month ends.", 0),),
        topic="service credits",
        missing="the month of the outage",
        doc_type="contract",
    ),
    Intent(
        "eu_residency",
        (
            "Where is our data stored if we choose the EU region?",
            "Do backups of EU workspaces ever leave the EU?",
        ),
        "EU region data centre locations backups",
        evidence=(
            ("DATA-RESIDENCY-EU@1", "Primary data centre"),
            ("DATA-RESIDENCY-EU@1", "Both locations are inside"),
        ),
        neighbours=(("DATA-RESIDENCY-UK@1", "UK"),),
        answer=(
            "EU-region data is stored in Frankfurt (primary) and Dublin (secondary and backups), "
            "and backups of EU-region workspaces never leave the EU."
        ),
        claims=(
            ("The EU region uses Frankfurt as primary and Dublin for secondary and backups.", 0),
            ("Backups of EU-region workspaces never leave the EU.", 1),
        ),
        topic="data residency",
        missing="the region your workspace is hosted in",
    ),
    Intent(
        "retention_after_end",
        (
            "What happens to our content after our subscription ends?",
            "How long can we still export our files after we cancel?",
        ),
        "content retention after subscription ends export window",
        evidence=(
            ("DATA-RETENTION@2", "3.1 During the"),
            ("DATA-RETENTION@2", "3.2 When the export window"),
        ),
        neighbours=(("DATA-RETENTION@1", "after"),),
        answer=(
            "You get a 30-day read-only export window. After it closes, content is deleted from "
            "production within 30 further days, and backups are purged within 35 days after that."
        ),
        claims=(
            ("After the subscription ends there is a 30-day read-only export window.", 0),
            ("Content is deleted from production within 30 days after the window closes.", 1),
        ),
        topic="data retention",
        missing="the date your subscription ended",
    ),
    Intent(
        "sso_team",
        (
            "Is single sign-on included in the Team plan?",
            "Since SSO comes with every plan, how do we switch it on for our Team workspace?",
        ),
        "single sign-on Team plan",
        evidence=(
            ("SEC-IDENTITY@2", "1.3 Starter and Team"),
            ("SEC-IDENTITY@2", "1.1 Single sign-on"),
        ),
        neighbours=(("SEC-IDENTITY@1", "sign"),),
        answer=(
            "Single sign-on is not part of the Team plan: it is included on Business and "
            "Enterprise only, and the Team SSO add-on is no longer sold."
        ),
        claims=(
            ("Starter and Team workspaces do not include SSO.", 0),
            ("SSO is included on Business and Enterprise only.", 1),
        ),
        topic="single sign-on",
        missing="the plan you are on",
    ),
    Intent(
        "support_hours_team",
        (
            "What are the support hours for Team customers?",
            "Do Team customers get chat support at night?",
        ),
        "support hours Team tier",
        evidence=(("SUP-HOURS@1", "| Tier | Channels"),),
        neighbours=(("FAQ-COMMUNITY@1", "24/7 chat"),),
        answer=(
            "Team customers get email and chat support Monday to Friday, 08:00-18:00 hub time, "
            "with a first response target of 1 business day."
        ),
        claims=(("Team support runs Monday to Friday, 08:00-18:00 hub time.", 0),),
        topic="support hours",
        missing="your billing region",
        doc_type="guide",
    ),
    Intent(
        "mfa_admins",
        (
            "Is MFA mandatory for administrators?",
            "Do our admins have to use two-factor authentication?",
        ),
        "multi-factor authentication administrators mandatory",
        evidence=(("SEC-IDENTITY@2", "2.1 From 1 February 2025"),),
        neighbours=(("SEC-IDENTITY@2", "2.3 For other users"),),
        answer=(
            "Yes. Since 1 February 2025 multi-factor authentication is mandatory for every "
            "administrator account on every tier."
        ),
        claims=(("MFA is mandatory for every administrator account since 1 February 2025.", 0),),
        topic="sign-in security",
        missing="the tier of your workspace",
    ),
    Intent(
        "team_price",
        (
            "How much is the Team plan per user on monthly billing?",
            "What does Team cost per user per month?",
        ),
        "Team plan list price per user monthly",
        evidence=(("PROD-PLANS@2", "| Tier | Monthly billing"),),
        neighbours=(("PROD-PLANS@1", "Team"),),
        answer=(
            "Team costs 14 USD (13 EUR) per user per month on monthly billing, or 12 USD per user "
            "per month when billed annually."
        ),
        claims=(("Team is 14 USD per user per month on monthly billing.", 0),),
        topic="plan prices",
        missing="your billing currency",
        doc_type="price_list",
    ),
)


RELATED_ONLY: tuple[Intent, ...] = (
    Intent(
        "refund_vat",
        (
            "Does a refund of our annual plan include the VAT we paid?",
            "Will we get the sales tax back as well when the refund is approved?",
        ),
        "annual refund VAT included",
        neighbours=(
            ("POL-REFUND-ANNUAL@1", "Owners and billing administrators can submit"),
            ("PROD-PLANS@2", "Euro-area billing addresses"),
        ),
        topic="refunds",
        missing="the invoice the refund is for",
    ),
    Intent(
        "apac_telemetry",
        (
            "Is telemetry from our APAC workspace processed in Australia?",
            "Where does usage telemetry go for Sydney-hosted workspaces?",
        ),
        "APAC workspace telemetry processing location",
        neighbours=(
            ("DATA-RESIDENCY-EU@1", "4.2 Service telemetry"),
            ("DATA-RESIDENCY-APAC@1", "APAC"),
        ),
        topic="data residency in APAC",
        missing="the region your workspace is hosted in",
    ),
)


OUT_OF_SCOPE: tuple[Intent, ...] = (
    Intent(
        "weather",
        ("What's the weather in Dublin tomorrow?",),
        "weather Dublin",
        neighbours=(("SUP-HOURS@1", "Dublin hub"),),
        topic="the weather",
        missing="a question about Brightwave Workspace",
    ),
    Intent(
        "competitor",
        ("Which workspace tool is cheaper than Brightwave?", "Is Brightwave cheaper than Slack?"),
        "cheaper alternative competitor price",
        neighbours=(("PROD-PLANS@2", "Starter prices are unchanged"),),
        topic="other vendors' prices",
        missing="the Brightwave plan you want to compare",
    ),
    Intent(
        "gmail",
        ("How do I reset my personal Gmail password?",),
        "reset Gmail password",
        neighbours=(("SEC-IDENTITY@2", "Passwords must have"),),
        topic="other services' accounts",
        missing="the Brightwave account you mean",
    ),
    Intent(
        "photos",
        ("Can Brightwave print my holiday photos?",),
        "print photos",
        neighbours=(("FAQ-COMMUNITY@1", "phone photos"),),
        topic="printing",
        missing="the Brightwave feature you mean",
        doc_type="faq",
    ),
)


AMBIGUOUS: tuple[Intent, ...] = (
    Intent(
        "cancel_window",
        ("How long do we have to cancel?", "Until when can we cancel and get money back?"),
        "cancellation deadline refund",
        neighbours=(
            ("POL-REFUND-MONTHLY@2", "2.1 A customer may ask"),
            ("POL-REFUND-ANNUAL@1", "2.1 If a customer cancels"),
        ),
        topic="cancellation",
        missing="whether you are billed monthly or annually",
    ),
    Intent(
        "price_generic",
        ("What's the price?", "How much does it cost?"),
        "price",
        neighbours=(("PROD-PLANS@2", "| Tier | Monthly billing"),),
        topic="prices",
        missing="the plan and billing currency you mean",
        doc_type="price_list",
    ),
    Intent(
        "logs_kept",
        ("How long are logs kept?",),
        "log retention period",
        neighbours=(("DATA-RETENTION@2", "| Data type | Retention period"),),
        topic="log retention",
        missing="which logs you mean (audit logs or Connect run logs)",
    ),
)


RESTRICTED_TOPICS: tuple[Intent, ...] = (
    Intent(
        "halvorsen",
        (
            "Is Brightwave being sued by Halvorsen Freight?",
            "What is the status of the Halvorsen outage claim?",
        ),
        "Halvorsen Freight claim status",
        neighbours=(("SLA-ENTERPRISE@2", "Claims must be submitted within"),),
        topic="a legal matter",
        restricted_source=("LEGAL-DISPUTE-HALVORSEN@1", "1.1 Halvorsen Freight AS"),
        topic_key="legal_dispute",
        doc_type="legal",
    ),
    Intent(
        "breach",
        (
            "We think someone broke into our workspace. What should we do?",
            "Was our data part of a security breach last week?",
        ),
        "security incident workspace breach",
        neighbours=(("SEC-INCIDENT-NOTICE@2", "3.1 Brightwave notifies"),),
        topic="a security incident",
        restricted_source=("SEC-IR-RUNBOOK@1", ""),
        topic_key="security_incident",
    ),
    Intent(
        "gdpr_erasure",
        (
            "Please delete all personal data you hold about me under GDPR.",
            "I want a copy of every piece of personal data Brightwave has on me.",
        ),
        "personal data request erasure access",
        neighbours=(("DATA-RETENTION@2", "After termination, the workspace owner"),),
        topic="a personal data request",
        topic_key="personal_data_request",
    ),
)


NOT_ALLOWED: tuple[Intent, ...] = (
    Intent(
        "price_2026",
        (
            "Will Team prices go up next year?",
            "Is the Starter plan being discontinued?",
        ),
        "2026 price increase Team Starter withdrawal",
        neighbours=(("PROD-PLANS@2", "Starter prices are unchanged"),),
        topic="future prices",
        missing="the plan you are on",
        restricted_source=("MEMO-PRICING-2026@1", "| Tier | Monthly billing, current"),
        doc_type="price_list",
    ),
)


CLEARED: tuple[tuple[Intent, str, tuple[str, ...]], ...] = (
    (
        Intent(
            "halvorsen_internal",
            ("What settlement authority did the General Counsel approve for Halvorsen?",),
            "Halvorsen settlement authority",
            evidence=(("LEGAL-DISPUTE-HALVORSEN@1", "3.1 The General Counsel"),),
            answer="The General Counsel approved settlement authority of up to 150,000 EUR.",
            claims=(("Settlement authority of up to 150,000 EUR was approved.", 0),),
            doc_type="legal",
        ),
        "legal_counsel",
        ("public", "internal", "restricted"),
    ),
    (
        Intent(
            "pricing_internal",
            ("What will Team cost per user per month from January 2026?",),
            "Team price 2026",
            evidence=(("MEMO-PRICING-2026@1", "| Tier | Monthly billing, current"),),
            answer=(
                "From 1 January 2026 Team will cost 16 USD per user per month on monthly billing."
            ),
            claims=(("Team monthly billing rises to 16 USD per user from 2026-01-01.", 0),),
            doc_type="internal_memo",
        ),
        "sales_leadership",
        ("public", "internal", "restricted"),
    ),
)


FILLER: tuple[tuple[str, str], ...] = (
    ("FAQ-PRODUCT@1", ""),
    ("OPS-MAINTENANCE@1", ""),
    ("POL-AUP@1", ""),
    ("SUP-ESCALATION@1", ""),
    ("PROD-CONNECT@1", ""),
    ("ANN-RELEASE-2025-Q2@1", ""),
    ("SUP-GUIDE-REFUNDS@1", ""),
    ("SLA-TEAM@1", ""),
)


# Personal data some people type into the assistant (redaction must catch all of it).
PII_SUFFIXES: tuple[str, ...] = (
    " My email is {first}.{last}@{company}.example if you need it.",
    " You can call me back on +44 20 7946 0{n3}.",
    " Our billing account is BWA-{n8}.",
    " The card 4111 1111 1111 1111 was charged twice.",
    " Support PIN: {n5}.",
    " Reach me at (415) 555-01{n2} after 3pm.",
)


FIRST = ("jana", "li", "marco", "aisha", "tomasz", "grace", "olu", "mei")


LAST = ("novak", "wong", "rossi", "khan", "berg", "okafor", "silva", "tanaka")


COMPANY = ("acme-logistics", "northwind", "fabrikam", "contoso", "tailspin")


# Wording violations (one per kind) used for every 12th refusal
VIOLATIONS: tuple[str, ...] = (
    "There is no refund policy for this situation, so this is not possible.",
    "I could not answer: my retrieval score was 0.41, below the 0.55 threshold.",
    "Please write to https://brightwave-refunds.help/claims and they will sort it out for you.",
    "I cannot confirm this from the documents available to you, but customers usually get 60 days.",
    "The answer is in the Memo: list price changes for 2026 (confidential), which you cannot open.",
)
