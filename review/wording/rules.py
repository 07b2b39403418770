"""The wording rules as regular expressions over small vocabularies: universal negatives,
leaked internals, unlisted contacts, claims after a refusal, blaming the user, follow-ups
without a request, and escalations that name a person."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from review.wording.findings import Finding

_I = re.IGNORECASE


_X = re.VERBOSE


_NEG = r"(?:\s+not|n't|\s*not)"  # "does not", "doesn't", "cannot"


# Quotes are folded to ASCII (same length) so one apostrophe handles "don't" and "don’t".
_FOLD = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})


def _fold(text: str) -> str:
    return text.translate(_FOLD)


# -- sentences and clauses --------------------------------------------------------------------

# A run of stops is matched once, from its first character (a run of n '?' before a letter was
# n² steps when every position of it started a new attempt)
_SENT_END = re.compile(
    r"(?<![.!?])[.!?]++[\"')\]]*(?=\s+[\"'(\[{]?[A-Z0-9{])|\n\s*\n|\n(?=\s*[-*•\d])"
)


_ABBREV = re.compile(r"(?:\b(?:mr|mrs|ms|mx|dr|prof|st|no|vs|etc|approx|e\.g|i\.e)\.)$", _I)


_CLAUSE_BREAK = re.compile(
    r"[;:()]|\s[-–—]\s|—|,\s+(?=(?:and|but|so|because|although|though|while|or|whereas)\b)",
    _I,
)


def _sentences(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _SENT_END.finditer(text):
        if _ABBREV.search(text[max(0, m.start() - 6) : m.start() + 1]):
            continue
        end = m.end()
        if text[start:end].strip():
            spans.append((start, end))
        start = end
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def _sentence_of(sentences: Sequence[tuple[int, int]], pos: int) -> int:
    i = bisect.bisect_right([s for s, _ in sentences], pos) - 1
    return min(max(i, 0), len(sentences) - 1)


# How far (in characters) a rule looks around a match. Real sentences are far shorter; the cap
# keeps a huge unpunctuated text (a pasted table, say) linear instead of quadratic.
_WINDOW = 400


def _clause(text: str, s_start: int, s_end: int, m_start: int, m_end: int) -> tuple[int, int]:
    """The clause of the sentence ``[s_start, s_end)`` around the match ``[m_start, m_end)``."""
    c_start = max(s_start, m_start - _WINDOW)
    for b in _CLAUSE_BREAK.finditer(text, c_start, m_start):
        c_start = b.end()
    limit = min(s_end, m_end + _WINDOW)
    b2 = _CLAUSE_BREAK.search(text, m_end, limit)
    return c_start, (b2.start() if b2 else limit)


# -- universal negatives ----------------------------------------------------------------------

# {subject} is who may be said not to offer something: "we", "the company", and the names the
# deployment's wording file gives under company_names.
_UNIVERSAL_TEXT = rf"""
      \b(?:does|do|did){_NEG}\s+exist\b
    | \bno\s+longer\s+exists?\b | \bnever\s+existed\b
    | \bthere(?:\s+is|'s|\s+are|\s+was|\s+were|\s+will\s+be)\s+(?:no|nothing)\b
        (?!\s+(?:need|problem|rush|hurry|worries|doubt|wrong|to\s+worry|charge|cost|obligation)\b)
    | \bthere\s+(?:is|are|was|were){_NEG}\s+(?:a|an|any|anything)\b
    | \bno\s+such\b
    | \b(?:{{subject}})\s+(?:(?:do|does){_NEG}|never)\s+
        (?:offer|provide|support|allow|grant|sell|issue|accept|refund|permit)s?\b
    | \b(?:is|are|was|were){_NEG}\s+(?:\w+\s+)?anywhere\b | \bnowhere\b
    | \b(?:is|are){_NEG}\s+(?:refundable|eligible|offered|supported)\b
    | \b(?:is|are|was|were){_NEG}\s+possible\b
        (?!\s+for\s+me|\s+to\s+(?:confirm|answer|say|tell|determine|verify|find|establish))
    | (?:\bis|\bare|'s|'re)\s+(?:impossible|never)\b
    | \b(?:{{subject}})\s+(?:has|have)\s+no\b
    | \b(?:{{subject}})\s+(?:do|does){_NEG}\s+have\s+(?:a|an|any)\s+
        (?:policy|rule|option|plan|programme|program|process|discount|refund|way)\b
    | \bno\s+(?:[a-z-]+\s+){{1,4}}?(?:is|are|will\s+be|can\s+be)\s+
        (?:available|offered|possible|given|provided|allowed|permitted|granted|issued|made)\b
    """


def _universal_pattern(company_names: Sequence[str]) -> re.Pattern[str]:
    names = [r"\s+".join(map(re.escape, _fold(n).split())) for n in company_names if n.split()]
    subject = "|".join(["we", *names, r"the\s+company"])
    return re.compile(_UNIVERSAL_TEXT.replace("{subject}", subject), _I | _X)


# Phrases that scope a negative to what the person may see ("... in the documents available
# to you"), which is exactly the wording the rule asks for.
_SCOPE = re.compile(
    r"""
      \bavailable\s+to\s+(?:you|me|your\s+\w+)\b
    | \b(?:you|I)(?:\s+|'re\s+|'ve\s+)(?:can|could|may|are\s+able\s+to|were\s+able\s+to|
        am\s+able\s+to|was\s+able\s+to|allowed\s+to|are\s+allowed\s+to|are\s+permitted\s+to)?
        \s*(?:access|see|search|view|read|use|have\s+access\s+to|got\s+access\s+to|find)\b
    | \bI\s+(?:searched|checked|looked|reviewed|found|could\s+find|can\s+find)\b
    | \b(?:in|from|within|among|across)\s+(?:the\s+|your\s+|these\s+|those\s+|my\s+|our\s+)?
        (?:[\w-]+\s+){0,2}?(?:documents?|docs|sources?|materials?|knowledge\s+base|
        documentation|search\s+results|records|files)\b
    """,
    _I | _X,
)


def _universal(ctx: _Ctx) -> Iterator[Finding]:
    for m in ctx.patterns.universal.finditer(ctx.norm):
        si = _sentence_of(ctx.sentences, m.start())
        s_start, s_end = ctx.sentences[si]
        c_start, c_end = _clause(ctx.norm, s_start, s_end, m.start(), m.end())
        if _SCOPE.search(ctx.norm, c_start, c_end):
            continue
        yield Finding(
            "universal_negative",
            m.start(),
            m.end(),
            f'"{ctx.text[m.start() : m.end()]}" tells the reader the answer does not exist; say '
            "instead that the sources available to them do not establish it.",
        )


# -- internal details -------------------------------------------------------------------------

_INTERNAL = re.compile(
    r"""
      \b(?:cosine\s+)?similarit(?:y|ies)\b
    | \b(?:relevance|retrieval|matching|match|ranking|rerank(?:er|ing)?|groundedness|grounding|
        bm25|confidence)\s+(?:scores?|thresholds?|levels?|values?)\b
    | \bscores?\s*(?:of|was|is|=|:)?\s*\d
    | \b\d+(?:\.\d+)?\s*%?\s+(?:score|similarity|relevance)\b
    | \bconfidence\s*(?:of|was|is|=|:|at)?\s*\d
    | \b(?:relevance|similarity|confidence|scored?)\b[^.!?\n\d]{0,40}?\d+(?:\.\d+)?\s*%
    | \b\d+(?:\.\d+)?\s*%\s*(?:confident|confidence|sure|certain)\b
    | \bretriev(?:al|er|ers)\b
    | \bre-?rank(?:er|ers|ing|ed)?\b
    | \bembeddings?\b
    | \bvector\s+(?:search|store|database|index|db)\b
    | \b(?:hybrid|semantic|keyword|lexical|dense|sparse|vector)\s+(?:search|ranking|index)\b
    | \bbm25\b | \brrf\b
    | \btop[-\s]?k\b
    | \btop[-\s]\d+\s+(?:results|passages|chunks|documents|hits|matches)\b
    | \btop-ranked\b | \branked\s+(?:first|second|third|\#?\d)
    | \bchunks?\b
    | \bgroundedness\b | \bungrounded\b
    | \b(?:below|above|under|over)\s+(?:the|our|my|its|a)\s+(?:[\w-]+\s+)?(?:threshold|cut-?off)\b
    | \b(?:\d+|zero|no)\s+(?:search\s+)?hits\b
    | \bsystem\s+prompt\b | \bLLM\b | \blanguage\s+model\b | \bcontext\s+window\b
    | \bindex\s+version\b
    """,
    _I | _X,
)


# Document ids with a version, such as POL-REFUND@2 (not e-mail addresses).
_DOC_REF = re.compile(r"(?<![\w.@-])[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*@v?\d+(?![\w-]|\.\w)")


def _internal(ctx: _Ctx) -> Iterator[Finding]:
    for m in _INTERNAL.finditer(ctx.norm):
        yield Finding(
            "leaked_internal",
            m.start(),
            m.end(),
            f'"{ctx.text[m.start() : m.end()]}" exposes how our search and scoring work inside, '
            "which customers should never see.",
        )
    ids = [(m.start(), m.end()) for m in _DOC_REF.finditer(ctx.norm)]
    if ctx.patterns.doc_ids is not None:
        ids += [
            (m.start(), m.end())
            for m in ctx.patterns.doc_ids.finditer(ctx.norm)
            if not any(m.start() < e and s < m.end() for s, e in ids)
        ]
    for s, e in ids:
        yield Finding(
            "leaked_internal",
            s,
            e,
            f'"{ctx.text[s:e]}" is an internal document identifier and should not appear in a '
            "customer message.",
        )
    for pattern in ctx.patterns.titles:
        for m in pattern.finditer(ctx.norm):
            yield Finding(
                "leaked_internal",
                m.start(),
                m.end(),
                f'"{ctx.text[m.start() : m.end()]}" is the title of a restricted document, so '
                "naming it reveals that the document exists.",
            )


def _title_patterns(titles: Iterable[str]) -> list[re.Pattern[str]]:
    variants: set[tuple[str, ...]] = set()
    for title in titles:
        title = _fold(title)
        whole = tuple(re.findall(r"\w+", title))
        if whole:
            variants.add(whole)
        # "Memo: list price changes for 2026 (confidential)" is also named without the bracket.
        bare = tuple(re.findall(r"\w+", re.sub(r"\s*\([^)]*\)\s*$", "", title)))
        if bare:
            variants.add(bare)
        # "Matter note: Halvorsen Freight AS v Acme Software Ltd": the part after the colon
        # is distinctive when it carries proper names, so it is a leak on its own.
        if ":" in title:
            rest = re.sub(r"\s*\([^)]*\)\s*$", "", title.split(":", 1)[1])
            words = re.findall(r"\w+", rest)
            if len(words) >= 3 and sum(w[:1].isupper() for w in words[1:]) >= 2:
                variants.add(tuple(words))
    return [
        re.compile(r"(?<!\w)" + r"\W+".join(map(re.escape, v)) + r"(?!\w)", _I)
        for v in sorted(variants, key=len, reverse=True)
    ]


# -- contacts ---------------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")


_URL = re.compile(
    r"""\bhttps?://[^\s<>()"']+
      | \bwww\.[^\s<>()"']+
      | (?<![\w.@-])(?:[a-z0-9-]{1,63}\.){1,6}
        (?:com|org|net|io|example|co|uk|de|fr|eu|info|biz|app|dev|ai)\b
        (?:/[^\s<>()"']*)?""",
    _I | _X,
)


_PHONE = re.compile(
    r"(?<![\w+.,/-])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,5}\)[\s.-]?)?\d{2,5}(?:[\s.-]\d{2,5}){1,4}"
    r"(?![\w%]|[.,]\d)"
)


_DATE_LIKE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{1,2}[./-]\d{1,2}[./-]\d{2,4}$")


_HONORIFIC = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s+"


_NAME_WORD = r"[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?"


_CONTACT_VERB = re.compile(
    r"\b(?i:contact|call|phone|ring|e-?mail|message|ask|ping|write\s+to|reach\s+out\s+to|reach|"
    r"get\s+in\s+touch\s+with|speak\s+(?:to|with)|talk\s+(?:to|with))\s+"
    rf"(?P<name>(?:{_HONORIFIC})?{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,2}})"
)


_TRAILING = ".,;:!?)]}'\""


# Words that make a Title-case phrase a team, role, product, document or place, not a person.
_ORG_WORDS_TEXT = """
    workspace workspaces connect support legal billing security privacy operations
    compliance sales finance customer customers success data protection officer account accounts
    manager managers team teams desk office department services service help helpdesk centre
    center portal engineering product products trust risk hr people it enterprise starter plan
    plans tier add-on eu uk apac us usa germany german france french europe european union
    kingdom united states gdpr sso sla slas api apis master subscription agreement addendum
    policy policies terms guide runbook matrix faq notes release incident response notification
    standard general counsel head chief director lead specialist specialists engineer engineers
    administrator admin admins owner owners representative agent agents community forum status
    page documentation knowledge base centre ticket tickets request requests processing
    residency retention deletion identity access key management maintenance invoicing refunds
    refund credit credits annual monthly premium business professional pro free trial
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december
    i we you our your the this that these those please thanks thank dear hi hello kind regards
    for if when while as a an and or but so of in on at to from by with about is are
"""


_ORG_WORDS = frozenset(_ORG_WORDS_TEXT.split())


_COMPANY_SUFFIX = re.compile(
    r"\s+(?:AS|ASA|AB|Ltd|Limited|GmbH|Inc|LLC|LLP|plc|PLC|SA|SAS|BV|AG)\b"
)


def _norm_url(url: str) -> str:
    url = url.rstrip(_TRAILING).lower()
    url = re.sub(r"^https?://", "", url)
    url = re.sub(r"^www\.", "", url)
    return url.rstrip("/")


def _digits(s: str) -> str:
    return re.sub(r"\D", "", s)


def _is_role_phrase(name: str, org_words: frozenset[str]) -> bool:
    words = re.sub(_HONORIFIC, "", name).split()
    return not re.match(_HONORIFIC, name) and all(w.lower() in org_words for w in words)


def _unlisted(ctx: _Ctx, taken: bytearray, s: int, e: int, what: str) -> Finding:
    """The finding for an unlisted contact at s:e, whose characters it claims in taken."""
    taken[s:e] = b"\x01" * (e - s)
    return Finding(
        "unlisted_contact",
        s,
        e,
        f'"{ctx.text[s:e]}" is {what} that is not on the approved contact list, so it may be '
        "wrong or invented.",
    )


def _unlisted_emails(ctx: _Ctx, taken: bytearray) -> Iterator[Finding]:
    for m in _EMAIL.finditer(ctx.norm):
        s, e = m.span()
        if m.group().lower() not in ctx.patterns.emails:
            yield _unlisted(ctx, taken, s, e, "an email address")
        else:
            taken[s:e] = b"\x01" * (e - s)


def _unlisted_urls(ctx: _Ctx, taken: bytearray) -> Iterator[Finding]:
    for m in _URL.finditer(ctx.norm):
        s, e = m.start(), m.start() + len(m.group().rstrip(_TRAILING))
        if any(taken[s:e]):
            continue
        url = _norm_url(m.group())
        if not any(url == a or url.startswith(a + "/") for a in ctx.patterns.urls):
            yield _unlisted(ctx, taken, s, e, "a web address")
        else:
            taken[s:e] = b"\x01" * (e - s)


def _unlisted_phones(ctx: _Ctx, taken: bytearray) -> Iterator[Finding]:
    for m in _PHONE.finditer(ctx.norm):
        s, e = m.start(), m.end()
        raw = m.group()
        digits = _digits(raw)
        if any(taken[s:e]) or not 7 <= len(digits) <= 15 or _DATE_LIKE.match(raw):
            continue
        if s > 0 and ctx.norm[s - 1] in "£$€":
            continue
        if digits not in ctx.patterns.phones:
            yield _unlisted(ctx, taken, s, e, "a phone number")


def _unlisted_names(ctx: _Ctx, taken: bytearray) -> Iterator[Finding]:
    allowed = ctx.patterns
    for m in _CONTACT_VERB.finditer(ctx.norm):
        name = m.group("name")
        s, e = m.start("name"), m.end("name")
        if any(taken[s:e]) or _is_role_phrase(name, allowed.org_words):
            continue
        folded = " ".join(name.split()).casefold()
        if any(folded in a for a in allowed.contact_texts):
            continue
        yield _unlisted(ctx, taken, s, e, "a named contact")


def _contacts(ctx: _Ctx) -> Iterator[Finding]:
    """Emails, then URLs, phones and named contacts not on the approved list; each kind skips
    the characters an earlier one claimed."""
    taken = bytearray(len(ctx.norm))  # characters already claimed by an email, URL or phone
    yield from _unlisted_emails(ctx, taken)
    yield from _unlisted_urls(ctx, taken)
    yield from _unlisted_phones(ctx, taken)
    yield from _unlisted_names(ctx, taken)


# -- refusal followed by a claim --------------------------------------------------------------

_REFUSAL = re.compile(
    rf"""
    (?:\b(?:I|we)(?:'m|'re|\s+am|\s+are|\s+was|\s+were)?\s+)?  # the subject, for the span
    (?:
      \b(?:cannot|can\s*not|can't|could{_NEG}|unable\s+to|not\s+able\s+to)\s+(?:\w+\s+)?
        (?:confirm|find|answer|verify|say|tell|determine|locate|establish|see|give|provide|
        support|back|check|help|share)\b
    | \b(?:do|does|did){_NEG}\s+(?:say|state|cover|mention|establish|confirm|include|answer|
        settle|address|specify|show)\b
    | \bnone\s+of\s+(?:them|these|those|the\s+\w+)\s+(?:says?|states?|covers?|mentions?|
        answers?|establish(?:es)?)\b
    | \bnothing\b[^.!?;]{{0,60}}?\b(?:says?|covers?|mentions?|answers?|establishes)\b
    | \bI\s+(?:do{_NEG}|don't)\s+(?:have\s+(?:enough|sufficient|any|the)\s+information|know)\b
    | \bI\s+have\s+no\s+information\b
    | \bI(?:'m|\s+am)\s+not\s+(?:sure|certain)\b
    )
    """,
    _I | _X,
)


_CONTRAST = re.compile(
    r"\b(?:but|however|though|although|that\s+said|even\s+so|nevertheless|still)\b", _I
)


_LEADING_CONTRAST = re.compile(
    r"\W*(?:but|however|that\s+said|even\s+so|still|though|nevertheless)\b", _I
)


_STRONG_HEDGE = re.compile(
    r"""
      \b(?:usually|typically|generally|normally|often|commonly|likely|probably|presumably|
        traditionally|mostly)\b
    | \b(?:usual|typical|normal|standard|common)\s+(?:answer|rule|practice|period|window|
        term|terms|case|approach|policy|limit)\b
    | \bin\s+(?:most|many)\s+cases\b | \bin\s+general\b | \bas\s+a\s+rule\b | \bin\s+practice\b
    | \bmost\s+(?:[\w-]+\s+)?(?:customers|clients|plans|contracts|agreements|accounts|people|
        users|companies|organi[sz]ations|teams|workspaces|cases|subscriptions|businesses)\b
    | \bI\s+(?:believe|think|suspect|assume|guess|expect)\b | \bI'd\s+(?:guess|say|expect)\b
    | \b(?:pretty|fairly|quite)\s+sure\b | \bmy\s+understanding\s+is\b
    | \bas\s+far\s+as\s+I\s+know\b
    """,
    _I | _X,
)


_QUANTITY = re.compile(
    r"""
      \d
    | [£$€]
    | \b(?:minutes?|hours?|days?|weeks?|months?|years?)\b
    | \b(?:percent|per\s+cent)\b
    """,
    _I | _X,
)


_DEFINITE = re.compile(
    r"""(?:\b(?:is|are|was|were|will|would|gets?|has|have|had|can|qualif(?:y|ies)|
        receives?|includes?|covers?|appl(?:y|ies)|lasts?|costs?|expires?|renews?|allows?|
        offers?|takes?|needs?|must|should|does|do)\b|'(?:s|re|ll)\b)""",
    _I | _X,
)


# A request for information, a pointer to a role or process, or the assistant offering to act:
# these are what a refusal should be followed by.
_REQUEST = re.compile(
    r"""
      \?
    | \b(?:could|can|would|will)\s+you\b | \bplease\b | \bif\s+you\b | \blet\s+me\s+know\b
    | \btell\s+me\b | \bshare\b | \bsend\b
    """,
    _I | _X,
)


_POINTER = re.compile(
    r"""
      \b(?:the|our|your|a)\s+(?:[\w-]+\s+){0,2}?team\b(?!\s+(?:plan|tier))
    | \baccount\s+manager\b | \bsupport\s+ticket\b | \b(?:contact|ask|reach\s+out|
        get\s+in\s+touch)\b | \bcheck\s+with\b | \bdepartment\b | \bsomeone\b
    | \bI(?:\s+can|\s+could|\s+will|'ll|'d|\s+would)\b
    """,
    _I | _X,
)


_SUBCLAUSE_BREAK = re.compile(r"[,;:]|\s[-–—]\s|—")


def _is_claim(region: str, *, contrastive: bool) -> bool:
    start = 0
    for piece_end in [*(m.start() for m in _SUBCLAUSE_BREAK.finditer(region)), len(region)]:
        piece = region[start:piece_end]
        start = piece_end + 1
        if not piece.strip() or _REQUEST.search(piece):
            continue
        if _REFUSAL.search(piece) or _SCOPE.search(piece):
            continue
        hedged, quantified = _STRONG_HEDGE.search(piece), _QUANTITY.search(piece)
        if _POINTER.search(piece):
            # "the Billing team can help" is fine; "the Billing team usually refunds within
            # 30 days" is a claim about the outcome.
            if hedged and quantified:
                return True
            continue
        if hedged or quantified:
            return True
        if contrastive and _DEFINITE.search(piece) and not re.match(r"\W*(?:but\s+)?I\b", piece):
            return True
    return False


def _claims(ctx: _Ctx) -> Iterator[Finding]:
    flagged_until = -1
    for m in _REFUSAL.finditer(ctx.norm):
        if m.start() < flagged_until:
            continue
        si = _sentence_of(ctx.sentences, m.start())
        s_end = min(ctx.sentences[si][1], m.end() + _WINDOW)
        region_start = region_end = -1
        # The rest of the refusal sentence: a hedge there starts the claim.
        rest = ctx.norm[m.end() : s_end]
        hedge = _first(rest, _CONTRAST, _STRONG_HEDGE)
        if hedge is not None and _is_claim(
            rest[hedge[0] :], contrastive=bool(_CONTRAST.match(rest, hedge[0]))
        ):
            region_start, region_end = m.end() + hedge[0], s_end
        if region_end < 0 and si + 1 < len(ctx.sentences):
            n_start, n_end = ctx.sentences[si + 1]
            n_end = min(n_end, n_start + _WINDOW)
            nxt = ctx.norm[n_start:n_end]
            # The next sentence: a claim needs a hedge or a number/duration there, or a
            # definite statement when it opens with "But"/"However".
            lead = _LEADING_CONTRAST.match(nxt)
            if _is_claim(nxt, contrastive=lead is not None):
                region_start, region_end = n_start, n_end
        if region_end < 0:
            continue
        end = len(ctx.norm[:region_end].rstrip())
        flagged_until = end
        claim = ctx.text[region_start:end].strip(" ,.;:-–—\n")
        yield Finding(
            "claim_after_refusal",
            m.start(),
            end,
            f'After refusing ("{ctx.text[m.start() : m.end()]}"), the message still gives an '
            f'unsupported answer ("{_shorten(claim)}"), which readers will take as fact.',
        )


def _first(text: str, *patterns: re.Pattern[str]) -> tuple[int, int] | None:
    best: tuple[int, int] | None = None
    for p in patterns:
        m = p.search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), m.end())
    return best


def _shorten(s: str, limit: int = 80) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


# -- blaming the person -----------------------------------------------------------------------

_BLAME = re.compile(
    rf"""
      \byou\s+(?:asked|phrased|worded)\s+(?:it\s+|this\s+|that\s+|the\s+question\s+)?
        (?:wrongly|incorrectly|badly|poorly|wrong)\b
    | \byou\s+asked\s+(?:the|a)\s+wrong\b
    | \b(?:your|the|this|that)\s+(?:question|request|query|message|input|prompt)\s+
        (?:is|was|'s)\s+(?:\w+\s+)?(?:unclear|invalid|wrong|incorrect|confusing|vague|
        incomplete|malformed|nonsensical|meaningless|not\s+clear|not\s+valid|badly|poorly)\b
    | \b(?:your|the|this|that)\s+(?:question|request|query)\s+(?:(?:does|did){_NEG}\s+make|
        makes\s+no)\s+(?:any\s+)?sense\b
    | \byou\s+should\s+have\s+(?:been\s+(?:clearer|more\s+\w+)|provided|given|included|
        specified|said|told|mentioned|asked|checked|read|explained|attached|stated|known)\b
    | \byou\s+(?:did{_NEG}|have{_NEG}|failed\s+to|forgot\s+to|neglected\s+to)\s+
        (?:provide|give|gave|include|specify|say|tell|mention|explain|state|attach|read|check)
        \w*\b
    | \byou\s+(?:need|have)\s+to\s+be\s+(?:more\s+)?(?:specific|clear|precise|clearer)\b
    | \byou\s+must\s+be\s+more\s+\w+
    | \b(?:ask|phrase|rephrase|word)\s+(?:it\s+|your\s+question\s+|the\s+question\s+)?
        (?:properly|correctly|better)\b
    | \bas\s+I\s+(?:already|previously)\s+(?:said|told\s+you|explained|mentioned)\b
    | \byou(?:'ve|\s+have)?\s+misunderstood\b | \byou(?:'re|\s+are)\s+(?:confused|mistaken)\b
    | \b(?:user|your)\s+error\b
    | \bnot\s+a\s+(?:valid|proper|real|sensible)\s+question\b
    """,
    _I | _X,
)


_NOT_ACCUSING = re.compile(r"\b(?:if|unless|in\s+case|whether|when)\s+(?:\w+\s+){0,2}$", _I)


def _blame(ctx: _Ctx) -> Iterator[Finding]:
    for m in _BLAME.finditer(ctx.norm):
        if _NOT_ACCUSING.search(ctx.norm[max(0, m.start() - 40) : m.start()]):
            continue
        yield Finding(
            "blames_user",
            m.start(),
            m.end(),
            f'"{ctx.text[m.start() : m.end()]}" puts the blame on the person asking; ask for '
            "what is missing instead.",
        )


# -- follow-ups (F1) --------------------------------------------------------------------------

_ASK_VERB = (
    r"(?:tell|share|send|provide|confirm|specify|give|clarify|name|attach|include|mention|"
    r"point\s+me\s+to|say|check|choose|pick|select|let\s+me\s+know|add|upload|paste)"
)


# An ask is a request frame ("please ...", "could you ...", "if you can ...") or an imperative
# at the start of a sentence; "they say different things" is not an ask.
_ASK = re.compile(
    r"\b(?:please|kindly|could\s+you|can\s+you|would\s+you|will\s+you|if\s+you(?:\s+can|"
    r"\s+could)?|I\s+need\s+you\s+to|just)\s+(?:\w+\s+)?" + _ASK_VERB + r"\b"
    r"|\blet\s+me\s+know\b|\btell\s+me\b|^\W*" + _ASK_VERB + r"\b",
    _I,
)


_ITEM = re.compile(
    r"\b(?:contract|agreement|name|date|jurisdiction|country|region|document|plan|tier|order|"
    r"invoice|account|workspace|product|version|reference|number|period|year|month|entity|"
    r"location|policy|clause|currency|edition|company|quote|form|which|what|when|where)s?\b"
    r"|\{[a-z][a-z0-9_]*\}",
    _I,
)


def _followup(ctx: _Ctx) -> Iterator[Finding]:
    if "?" in ctx.norm:
        return
    for s, e in ctx.sentences:
        sentence = ctx.norm[s:e]
        if _ASK.search(sentence) and _ITEM.search(sentence):
            return
    stripped = ctx.norm.strip()
    if not stripped:
        return
    start = ctx.norm.index(stripped[0])
    yield Finding(
        "followup_without_request",
        start,
        start + len(stripped),
        "This follow-up does not ask for anything specific (such as the contract name, date, "
        "region or plan), so the person cannot tell what would help.",
    )


# -- escalations naming a person (E1) ---------------------------------------------------------

_PERSON_HONORIFIC = re.compile(rf"\b{_HONORIFIC}{_NAME_WORD}(?:\s+{_NAME_WORD})?")


_PERSON_AFTER_VERB = re.compile(
    r"\b(?i:ask|contact|call|e-?mail|message|ping|speak\s+(?:to|with)|talk\s+to|"
    r"reach\s+out\s+to|(?:forwarded|passed|escalated|handed|sent|assigned|given)\s+"
    r"(?:this|it|your\s+\w+)?\s*(?:on\s+|over\s+)?to)\s+"
    rf"(?P<name>{_NAME_WORD})\b"
)


_TITLE_RUN = re.compile(rf"\b{_NAME_WORD}(?:\s+{_NAME_WORD})+\b")


def _person(ctx: _Ctx) -> Iterator[Finding]:
    org_words = ctx.patterns.org_words
    spans: list[tuple[int, int]] = []
    for m in _PERSON_HONORIFIC.finditer(ctx.norm):
        spans.append((m.start(), m.end()))
    for m in _PERSON_AFTER_VERB.finditer(ctx.norm):
        if m.group("name").lower() not in org_words:
            spans.append((m.start("name"), m.end("name")))
    for m in _TITLE_RUN.finditer(ctx.norm):
        if _COMPANY_SUFFIX.match(ctx.norm, m.end()):
            continue
        words = list(re.finditer(_NAME_WORD, m.group()))
        for a, b in itertools.pairwise(words):
            if a.group().lower() not in org_words and b.group().lower() not in org_words:
                spans.append((m.start() + a.start(), m.start() + b.end()))
                break
    merged: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if merged and s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    for s, e in merged:
        yield Finding(
            "escalation_names_person",
            s,
            e,
            f'"{ctx.text[s:e]}" looks like a person\'s name; an escalation should point to a '
            "role, team or process that will still be right when people change jobs.",
        )


# -- running the rules ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Patterns:
    titles: tuple[re.Pattern[str], ...]
    doc_ids: re.Pattern[str] | None
    emails: frozenset[str]
    urls: frozenset[str]
    phones: frozenset[str]
    contact_texts: tuple[str, ...]
    universal: re.Pattern[str]
    org_words: frozenset[str]


@lru_cache(maxsize=64)
def _patterns(
    restricted_titles: tuple[str, ...],
    allowed_contacts: tuple[str, ...],
    doc_ids: tuple[str, ...],
    company_names: tuple[str, ...] = (),
) -> _Patterns:
    emails: set[str] = set()
    urls: set[str] = set()
    phones: set[str] = set()
    for contact in allowed_contacts:
        folded = _fold(contact)
        found_emails = [e.lower() for e in _EMAIL.findall(folded)]
        emails.update(found_emails)
        rest = _EMAIL.sub(" ", folded)
        urls.update(_norm_url(u) for u in _URL.findall(rest))
        for p in _PHONE.findall(_URL.sub(" ", rest)):
            if 7 <= len(_digits(p)) <= 15:
                phones.add(_digits(p))
    ids = sorted({i.strip() for i in doc_ids if len(i.strip()) >= 3}, key=len, reverse=True)
    id_re = (
        re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, ids)) + r")(?:@v?\d+)?(?![\w-])")
        if ids
        else None
    )
    return _Patterns(
        titles=tuple(_title_patterns(restricted_titles)),
        doc_ids=id_re,
        emails=frozenset(emails),
        urls=frozenset(urls),
        phones=frozenset(phones),
        contact_texts=tuple(" ".join(_fold(c).split()).casefold() for c in allowed_contacts),
        universal=_universal_pattern(company_names),
        # a company's name makes a Title-case phrase a team or product, not a person
        org_words=_ORG_WORDS | {w.lower() for n in company_names for w in re.findall(r"\w+", n)},
    )


@dataclass(frozen=True)
class _Ctx:
    text: str
    norm: str
    sentences: list[tuple[int, int]]
    patterns: _Patterns


def rule_context(
    text: str,
    restricted_titles: Iterable[str] = (),
    allowed_contacts: Iterable[str] = (),
    doc_ids: Iterable[str] = (),
    company_names: Iterable[str] = (),
) -> _Ctx:
    """What every rule reads of one text: the text, its folded form and sentences, and the
    patterns of the titles, contacts, document ids and company names given."""
    patterns = _patterns(
        tuple(restricted_titles),
        tuple(allowed_contacts),
        tuple(str(i) for i in doc_ids),
        tuple(company_names),
    )
    norm = _fold(text)
    return _Ctx(text, norm, _sentences(norm), patterns)


#: each rule id's check, run on a :func:`rule_context`
RULE_CHECKS: dict[str, Callable[[_Ctx], Iterator[Finding]]] = {
    "universal_negative": _universal,
    "leaked_internal": _internal,
    "unlisted_contact": _contacts,
    "claim_after_refusal": _claims,
    "blames_user": _blame,
    "followup_without_request": _followup,
    "escalation_names_person": _person,
}
