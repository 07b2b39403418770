"""What an import says about the traces it made restricted because they cite documents the
corpus has never seen (the restricted rule's unknown-document reason,
:mod:`review.corpus.restricted_traces`): how many, which document ids (the first few and the
total, bounded however many there are) and the way forward (import the documents, or an
admin clears the rule)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from review.core import readable
from review.corpus.restricted_traces import Reason

__all__ = ["MAX_TRACKED", "SHOWN", "WAY_FORWARD", "UnknownDocuments"]

#: Distinct unknown document ids remembered (beyond it the total reads "more than").
MAX_TRACKED: Final = 100_000
#: Document ids named in a message.
SHOWN: Final = 20
#: Characters of one document id in a message.
ID_CHARS: Final = 80

WAY_FORWARD: Final = (
    "Way forward: import those documents into the corpus (Corpus page, or workbench "
    "import-docs); a trace restricted only because of them then opens by itself. Or an admin "
    "with clearance turns off “Traces citing unknown documents are restricted” on the Admin "
    "page (every such trace opens to everyone who may read traces), or clears traces one by "
    "one on their page (Mark this trace)."
)


def _short(doc_id: str) -> str:
    return doc_id if len(doc_id) <= ID_CHARS else doc_id[: ID_CHARS - 1] + "…"


@dataclass
class UnknownDocuments:
    """The imported traces restricted because they cite documents the corpus has never seen."""

    #: restricted traces with an unknown-document reason
    traces: int = 0
    #: of those, the ones with no other reason (clearing the rule opens them)
    only: int = 0
    #: of those, the ones citing a chunk that names no document at all
    nameless: int = 0
    #: the distinct unknown document ids (at most MAX_TRACKED)
    ids: set[str] = field(default_factory=set)
    #: more distinct ids were cited than ``ids`` holds
    more: bool = False

    def add(self, why: Iterable[Sequence[Reason]]) -> None:
        """Count the traces of one written batch by their reasons (as ``reasons_of`` gives
        them)."""
        for reasons in why:
            unknown = [r for r in reasons if r.kind == "unknown"]
            if not unknown:
                continue
            self.traces += 1
            if len(unknown) == len(reasons):
                self.only += 1
            if any(not r.subject for r in unknown):
                self.nameless += 1
            for r in unknown:
                if not r.subject or r.subject in self.ids:
                    continue
                if len(self.ids) < MAX_TRACKED:
                    self.ids.add(r.subject)
                else:
                    self.more = True

    def total_text(self) -> str:
        n = len(self.ids)
        return f"more than {n:,}" if self.more else f"{n:,}"

    def headline(self, imported: int) -> str:
        """ "6,078 of 6,078 imported traces are restricted because they cite documents the
        corpus has never seen (...)"; empty when none is."""
        if not self.traces:
            return ""
        out = (
            f"{self.traces:,} of {readable.count(imported, 'imported trace')} "
            f"{'is' if self.traces == 1 else 'are'} restricted because "
            f"{'it cites' if self.traces == 1 else 'they cite'} documents the corpus has never "
            f"seen ({self.total_text()} {readable.plural(len(self.ids), 'document id')})"
        )
        if self.nameless:
            verb = "cites" if self.nameless == 1 else "cite"
            out += f"; {self.nameless:,} {verb} a chunk that names no document"
        out += "."
        others = self.traces - self.only
        if others:
            out += (
                f" {others:,} of them {'is' if others == 1 else 'are'} also restricted for "
                "another reason (a restricted "
                "document, scope, title or attribute) and stay restricted either way."
            )
        return out

    def first_ids(self, shown: int = SHOWN) -> list[str]:
        """The first ``shown`` unknown document ids in sorted order, each cut to size."""
        return [_short(d) for d in sorted(self.ids)[:shown]]

    def ids_text(self, shown: int = SHOWN) -> str:
        """ "doc-1, doc-2, … (the first 20 of 1,234)", or every id when there are few."""
        first = self.first_ids(shown)
        if not first:
            return ""
        listed = ", ".join(first)
        if self.more or len(self.ids) > len(first):
            listed += f", … (the first {len(first)} of {self.total_text()})"
        return listed

    def lines(self, imported: int) -> list[str]:
        """The whole message, a line each: the count, the ids, the way forward."""
        if not self.traces:
            return []
        out = [self.headline(imported)]
        if self.ids:
            out.append("Unknown document ids: " + self.ids_text())
        out.append(WAY_FORWARD)
        return out
