"""Answers as assistants write them, each with the required claims of its case and whether a
careful reader would say the answer contradicts a figure of those claims.

Written by hand for the figure check (review.evaluation.claimcheck): correct answers that
count down, count up, give ranges, split a figure into parts, write decimal commas, put the
currency code first, spell numbers out or group thousands either way; and answers that state
another value for the same quantity. ``kind`` names what the example exercises.

``miss`` marks a contradiction the check leaves alone by design (the module text lists these:
units that do not convert exactly, multipliers in words, a value inside a claimed range); the
recall test counts them as misses and requires that nothing else is missed.
"""

from __future__ import annotations

from typing import NamedTuple


class FigureAnswer(NamedTuple):
    answer: str
    claims: tuple[str, ...]
    contradicts: bool
    kind: str
    miss: bool = False


REFUND_14 = "A refund of a monthly plan charge must be requested within 14 days of the charge date."
REFUND_ANNUAL_30 = "Annual plans: within 30 days of the start of the first annual term."
EXPORT_45 = "Customers can export their content for 45 days after the subscription ends."
NOTIFY_48 = (
    "Brightwave notifies each affected customer within 48 hours after confirming a security "
    "incident affecting its data."
)
NOTICE_60 = (
    "Written notice of non-renewal must be given at least 60 days before the end of the "
    "current term."
)
SLA = "The Enterprise SLA commits to at least 99.95% availability in each calendar month."
EDUCATION = (
    "The education discount is 40% off Team and Business list prices, on annual billing only."
)
GOODWILL = (
    "An agent may give goodwill credits of up to 50 EUR / 50 USD / 45 GBP per account in a "
    "rolling 12 months without approval."
)
TERM_12 = "An annual subscription runs for 12 months; a pro-rata refund covers the unused months."
PRICE_USD = "The Team plan costs USD 12 per user per month on monthly billing."
PRICE_EUR = "The Starter plan costs 30,00 € per month for up to five users."
ONBOARDING = "The onboarding package costs 1.200,00 EUR, charged once."
SEATS = "Business workspaces include up to 1,000 seats."
FILE_SIZE = "A single file on the Team plan can be at most 2 GB."
PAYOUT = "Approved refunds reach the card within 5 to 10 business days."
EXPORT_30 = "Content stays available for export for 30 days after the subscription ends."
DELETE = (
    "Content is then permanently deleted within the following 30 days, and backups are "
    "purged within 35 days after that."
)
TRIAL_30 = "The free trial of Brightwave Workspace lasts 30 days."
RESPONSE = "The first response target for Team support is 1 business day."
PRICE_RISE = (
    "The Team monthly list price is planned to rise from 14 to 16 USD per user per month from "
    "1 January 2026."
)
MAINTENANCE = "Scheduled maintenance is announced at least 72 hours in advance."
CREDIT = (
    "If monthly uptime falls below 99.95%, the customer receives a credit of 10% of the "
    "monthly fee."
)
OBJECT_14 = "A customer may object to a new sub-processor within 14 days after the notice."
WITHDRAW = "Consumers may withdraw from the contract within fourteen days of signing."
AUDIT_LOGS = "Audit logs are kept for 12 months."
LATE_FEE = "A late payment fee of 2.5% per month applies to overdue invoices."
MIN_SEATS = "The Enterprise plan requires a minimum of 250 seats."
INVOICE = "Invoices are payable within 30 days of the invoice date."
LIABILITY = "The cap can be raised to up to twice the 12-month fees with Commercial Legal approval."
NOTIFY_NOT_72 = "Since 15 January 2025 the commitment is 48 hours after confirmation, not 72 hours."


def _ok(answer: str, *claims: str, kind: str) -> FigureAnswer:
    return FigureAnswer(answer, claims, False, kind)


def _bad(answer: str, *claims: str, kind: str, miss: bool = False) -> FigureAnswer:
    return FigureAnswer(answer, claims, True, kind, miss)


CORRECT: tuple[FigureAnswer, ...] = (
    # counting down what is left of the window
    _ok(
        "You were charged 11 days ago, so you still have 3 days to ask for a refund.",
        REFUND_14,
        kind="countdown",
    ),
    _ok("Yes, you still have 3 days left in your refund window.", REFUND_14, kind="countdown"),
    _ok(
        "Your subscription ended last month; you can still export everything within the next "
        "five days.",
        EXPORT_45,
        kind="countdown",
    ),
    _ok(
        "Export is open for 45 days after the end date; for you that leaves 12 days.",
        EXPORT_45,
        kind="countdown",
    ),
    _ok(
        "We confirmed the incident this morning, so you will hear from us within the next 40 "
        "hours at the latest.",
        NOTIFY_48,
        kind="countdown",
    ),
    _ok(
        "Your term ends in 75 days, so you have 15 more days to send the written notice.",
        NOTICE_60,
        kind="countdown",
    ),
    _ok("The invoice is dated 20 days ago, so it is due in 10 days.", INVOICE, kind="sum"),
    _ok(
        "It has been 10 days since the charge, so you are still inside the window.",
        REFUND_14,
        kind="elapsed",
    ),
    _ok("Only 2 days remain: the window closes in 2 days.", REFUND_14, kind="countdown"),
    _ok("Your trial has 9 days remaining.", TRIAL_30, kind="countdown"),
    _ok(
        "Ten days have already passed since your charge, so please send the request today.",
        REFUND_14,
        kind="elapsed",
    ),
    _ok(
        "Counting from the end date, 40 days have gone by; you have another five days to export.",
        EXPORT_45,
        kind="countdown",
    ),
    _ok(
        "The notice went out a week ago, so you have another 7 days to object.",
        OBJECT_14,
        kind="countdown",
    ),
    _ok(
        "You can still withdraw; 4 days remain in your cooling-off period.",
        WITHDRAW,
        kind="countdown",
    ),
    _ok("You have 6 days left, since the trial started 24 days ago.", TRIAL_30, kind="countdown"),
    _ok("Hurry: the export window closes in 3 days.", EXPORT_45, kind="countdown"),
    _ok(
        "Your 2 remaining days are enough if you write to billing today.",
        REFUND_14,
        kind="countdown",
    ),
    # ranges that hold the claimed value, values inside a claimed range
    _ok("The money is usually back on your card in 7 business days.", PAYOUT, kind="range"),
    _ok("Expect 5-10 business days until the refund shows on the card.", PAYOUT, kind="range"),
    _ok("It takes between five and ten business days to reach the card.", PAYOUT, kind="range"),
    _ok("You will be notified within 24-48 hours of confirmation.", NOTIFY_48, kind="range"),
    _ok(
        "Depending on the tier the SLA commits to between 99.9% and 99.99% availability.",
        SLA,
        kind="range",
    ),
    _ok(
        "The Team price is rising from USD 14 to USD 16 per user per month.",
        PRICE_RISE,
        kind="range",
    ),
    _ok("Team will cost 16 USD per user per month from January 2026.", PRICE_RISE, kind="range"),
    _ok(
        "Refund requests are accepted within 10–15 days of the charge, so 14 days is safe.",
        REFUND_14,
        kind="range",
    ),
    # sums and pro-rata splits
    _ok("You used 3 months, so the remaining 9 months are refunded pro rata.", TERM_12, kind="sum"),
    _ok("Pro rata: 3 months used, 9 months refunded.", TERM_12, kind="sum"),
    _ok("You paid for 12 months; after 4 months you get 8 months back.", TERM_12, kind="sum"),
    _ok("Cancelling after 5 months means a pro-rata refund for 7 months.", TERM_12, kind="sum"),
    _ok(
        "Everything is gone within 95 days: 30 days for export, 30 for deletion and 35 for "
        "backups.",
        EXPORT_30,
        DELETE,
        kind="sum",
    ),
    _ok("Pay within 30 days; with 20 days already gone you have 10 left.", INVOICE, kind="sum"),
    _ok("Export is available for 30 days plus a 15-day grace period.", EXPORT_45, kind="sum"),
    _ok(
        "You have given 20 EUR already, so you can add up to 30 EUR more this year.",
        GOODWILL,
        kind="sum",
    ),
    _ok("The trial is 30 days: 23 days are used and 7 days are left.", TRIAL_30, kind="sum"),
    # decimal commas, thousands separators in both conventions
    _ok(
        "The Starter plan is 30,00 € a month for up to five users.", PRICE_EUR, kind="decimal comma"
    ),
    _ok("It costs €30 per month.", PRICE_EUR, kind="symbol before"),
    _ok("EUR 30.00 per month, covering up to 5 users.", PRICE_EUR, kind="code before"),
    _ok("Starter costs 30 euros a month.", PRICE_EUR, kind="currency word"),
    _ok("Onboarding is a one-off fee of 1.200 €.", ONBOARDING, kind="thousands point"),
    _ok("Onboarding costs EUR 1,200.", ONBOARDING, kind="thousands comma"),
    _ok("The onboarding package is 1 200 EUR.", ONBOARDING, kind="thousands space"),
    _ok("The onboarding package is €1,200.00, charged once.", ONBOARDING, kind="thousands comma"),
    _ok("Onboarding: 1.200,00 € (one-off).", ONBOARDING, kind="decimal comma"),
    _ok("Up to 1.000 seats are included on Business.", SEATS, kind="thousands point"),
    _ok("Business covers up to one thousand seats.", SEATS, kind="number words"),
    _ok("We guarantee 99,95 % monthly availability.", SLA, kind="decimal comma"),
    _ok("Overdue invoices incur 2,5% per month.", LATE_FEE, kind="decimal comma"),
    # currency codes and symbols before the amount
    _ok("It's USD 12 per user per month.", PRICE_USD, kind="code before"),
    _ok("US$12 per user, billed monthly.", PRICE_USD, kind="code before"),
    _ok("$12 per user per month on monthly billing.", PRICE_USD, kind="symbol before"),
    _ok("12 USD per user each month.", PRICE_USD, kind="code after"),
    _ok("Twelve dollars per user per month.", PRICE_USD, kind="number words"),
    _ok(
        "You may grant up to EUR 50 (or USD 50 / GBP 45) without approval.",
        GOODWILL,
        kind="code before",
    ),
    _ok(
        "For UK accounts the limit is £45 in any rolling 12 months.", GOODWILL, kind="symbol before"
    ),
    # number words, weeks, years
    _ok("You have fourteen days from the charge date.", REFUND_14, kind="number words"),
    _ok("Two weeks from the charge date.", REFUND_14, kind="weeks"),
    _ok("Within a fortnight of being charged.", REFUND_14, kind="weeks"),
    _ok("Within forty-eight hours of confirming the incident.", NOTIFY_48, kind="number words"),
    _ok("You need at least two hundred and fifty seats.", MIN_SEATS, kind="number words"),
    _ok("Sixty days' written notice before the term ends.", NOTICE_60, kind="number words"),
    _ok("Schools get forty percent off on annual billing.", EDUCATION, kind="number words"),
    _ok("The trial runs for thirty days.", TRIAL_30, kind="number words"),
    _ok("Audit logs are kept for a year.", AUDIT_LOGS, kind="years"),
    _ok("Audit logs are retained for one year.", AUDIT_LOGS, kind="years"),
    _ok("You can withdraw within 14 days of signing.", WITHDRAW, kind="number words"),
    _ok("The first response comes within one business day.", RESPONSE, kind="number words"),
    _ok("Within 48h of confirmation.", NOTIFY_48, kind="abbreviation"),
    # other figures of the case, other units, unrelated figures
    _ok(
        "Monthly plans: 14 days. Annual plans: 30 days.",
        REFUND_14,
        REFUND_ANNUAL_30,
        kind="other claim",
    ),
    _ok(
        "Annual plans get 30 days from the start of the term.",
        REFUND_14,
        REFUND_ANNUAL_30,
        kind="other claim",
    ),
    _ok(
        "We notify within 48 hours; regulators are told within 72 hours under the GDPR.",
        NOTIFY_48,
        kind="unrelated figure",
    ),
    _ok(
        "99.95% monthly availability; below that you receive a 10% credit.",
        SLA,
        kind="unrelated figure",
    ),
    _ok(
        "Ask within 14 days; refunds reach the card in 5 to 10 business days.",
        REFUND_14,
        PAYOUT,
        kind="other unit",
    ),
    _ok(
        "Ask within 14 days; the refund itself shows up about 3 days after approval.",
        REFUND_14,
        kind="unrelated figure",
    ),
    _ok(
        "Files can be up to 2 GB each; a Team workspace has 100 GB in total.",
        FILE_SIZE,
        kind="unrelated figure",
    ),
    _ok(
        "Renewals run for 12 months; notice is due 60 days before the term ends.",
        NOTICE_60,
        kind="other unit",
    ),
    _ok(
        "Maintenance is announced at least 72 hours ahead and lasts at most 4 hours.",
        MAINTENANCE,
        kind="unrelated figure",
    ),
    _ok("Yes, you can ask for a refund: just contact support.", REFUND_14, kind="no figure"),
    _ok(
        "We notify affected customers within two days of confirming an incident.",
        NOTIFY_48,
        kind="other unit",
    ),
    _ok(
        "Give notice at least two months before the end of the term.", NOTICE_60, kind="other unit"
    ),
    _ok(
        "Within 48 hours of confirmation; that replaced the old 72-hour commitment.",
        NOTIFY_NOT_72,
        kind="other claim",
    ),
    _ok(
        "Regulators are told within 72 hours; customers within 48 hours.",
        NOTIFY_NOT_72,
        kind="other claim",
    ),
    _ok(
        "Agents may give such a credit at most once in a year, up to 50 EUR.", GOODWILL, kind="rate"
    ),
    _ok("The refund for the unused months is paid at the end of a month.", TERM_12, kind="rate"),
    _ok(
        "Support answers 10 hours a day; the first response comes within 1 business day.",
        RESPONSE,
        kind="rate",
    ),
    _ok(
        "Team costs $12 per user per month, or $10 per user per month billed annually.",
        PRICE_USD,
        kind="unrelated figure",
    ),
    # negated figures, dates and section numbers
    _ok("The monthly window is not 30 days; that is the annual plan.", REFUND_14, kind="negated"),
    _ok("It's no longer 72 hours: the commitment is now two days.", NOTIFY_48, kind="negated"),
    _ok(
        "Unlike the annual plan's 30 days, monthly refunds must be requested within 14 days.",
        REFUND_14,
        kind="negated",
    ),
    _ok("Under clause 2.1 (effective 1 March 2025), ask within 14 days.", REFUND_14, kind="dates"),
    _ok(
        "Per section 1.2, give notice at least 60 days before 31 December 2025.",
        NOTICE_60,
        kind="dates",
    ),
    _ok(
        "Team support answers Monday to Friday, 08:00-18:00, within 1 business day.",
        RESPONSE,
        kind="times",
    ),
    _ok("On 1 April 2025 and 14 days later the window closed.", REFUND_14, kind="dates"),
    _ok(
        "Raise the cap to up to 2x the fees of the previous 12 months with Commercial Legal.",
        LIABILITY,
        kind="multiplier",
    ),
)

CONTRADICTING: tuple[FigureAnswer, ...] = (
    _bad("You can ask within 30 days of the charge date.", REFUND_14, kind="neighbour figure"),
    _bad("Refunds must be requested within 30 days.", REFUND_14, kind="neighbour figure"),
    _bad("You have thirty days.", REFUND_14, kind="number words"),
    _bad("You have four weeks to ask for a refund.", REFUND_14, kind="weeks"),
    _bad("Within 7 days of the charge.", REFUND_14, kind="plain"),
    _bad("Refund requests are accepted for 20-30 days after the charge.", REFUND_14,
         kind="range"),
    _bad("Within a week of the charge.", REFUND_14, kind="weeks"),
    _bad("The refund window is 30 days, so you still have 19 days.", REFUND_14,
         kind="countdown beside"),
    _bad("Refunds are not limited to 14 days; you have 30 days.", REFUND_14, kind="negated"),
    _bad("Requests made not more than 30 days after the charge are refunded.", REFUND_14,
         kind="bound"),
    _bad("Content can be exported for 30 days after cancellation.", EXPORT_45, kind="plain"),
    _bad("You have sixty days to export.", EXPORT_45, kind="number words"),
    _bad("Brightwave notifies customers within 72 hours after confirming an incident.",
         NOTIFY_48, kind="neighbour figure"),
    _bad("Affected customers hear from us within 24 hours.", NOTIFY_48, kind="plain"),
    _bad("Notice of non-renewal is due at least 90 days before the end of the term.",
         NOTICE_60, kind="neighbour figure"),
    _bad("Thirty days' written notice is required.", NOTICE_60, kind="number words"),
    _bad("The SLA commits to 99.9% monthly availability.", SLA, kind="percent"),
    _bad("99,5 % availability per calendar month.", SLA, kind="decimal comma"),
    _bad("Schools get 30% off annual plans.", EDUCATION, kind="percent"),
    _bad("There is a 50 percent discount for schools.", EDUCATION, kind="percent"),
    _bad("Twenty-five per cent off for universities.", EDUCATION, kind="number words"),
    _bad("The Team plan costs USD 15 per user per month.", PRICE_USD, kind="code before"),
    _bad("$14 per user per month.", PRICE_USD, kind="symbol before"),
    _bad("It's 10 USD per user monthly.", PRICE_USD, kind="code after"),
    _bad("Fifteen dollars per user per month.", PRICE_USD, kind="number words"),
    _bad("Starter is 35,00 € per month.", PRICE_EUR, kind="decimal comma"),
    _bad("Starter costs €25 a month.", PRICE_EUR, kind="symbol before"),
    _bad("EUR 30,50 per month for Starter.", PRICE_EUR, kind="decimal comma"),
    _bad("Onboarding costs 1.500 €.", ONBOARDING, kind="thousands point"),
    _bad("Onboarding costs EUR 1,000.", ONBOARDING, kind="thousands comma"),
    _bad("The onboarding package is €2.400,00.", ONBOARDING, kind="decimal comma"),
    _bad("Business includes up to 500 seats.", SEATS, kind="plain"),
    _bad("Business allows up to 2.000 seats.", SEATS, kind="thousands point"),
    _bad("Agents can give up to 100 EUR without approval.", GOODWILL, kind="code after"),
    _bad("Agents can give up to USD 75 per account.", GOODWILL, kind="code before"),
    _bad("UK agents may give up to £50 without approval.", GOODWILL, kind="symbol before"),
    _bad("The minimum term for an annual subscription is 18 months.", TERM_12, kind="plain"),
    _bad("Pro rata: 3 months used, 10 months refunded.", TERM_12, kind="sum off"),
    _bad("Enterprise needs at least 100 seats.", MIN_SEATS, kind="plain"),
    _bad("Files can be up to 5 GB on Team.", FILE_SIZE, kind="plain"),
    _bad("Invoices are payable within 14 days.", INVOICE, kind="plain"),
    _bad("You have 60 days from the invoice date to pay.", INVOICE, kind="plain"),
    _bad("Maintenance is announced at least 24 hours in advance.", MAINTENANCE, kind="plain"),
    _bad("The free trial lasts 14 days.", TRIAL_30, kind="neighbour figure"),
    _bad("The trial is two weeks long.", TRIAL_30, kind="weeks"),
    _bad("You can withdraw within 30 days.", WITHDRAW, kind="plain"),
    _bad("Audit logs are kept for 6 months.", AUDIT_LOGS, kind="plain"),
    _bad("Audit logs are kept for two years.", AUDIT_LOGS, kind="years"),
    _bad("A late fee of 5% per month applies.", LATE_FEE, kind="percent"),
    _bad("The first response comes within 2 business days.", RESPONSE, kind="plain"),
    _bad("You can object within 30 days after the notice.", OBJECT_14, kind="plain"),
    _bad("Refunds reach the card within 15 business days.", PAYOUT, kind="outside range"),
    _bad("Refunds reach the card in 2-3 business days.", PAYOUT, kind="outside range"),
    _bad("You receive a credit of 25% of the monthly fee.", CREDIT, kind="percent"),
    _bad("Monthly plans: within 21 days of the charge date.", REFUND_14, REFUND_ANNUAL_30,
         kind="two claims"),
    # left alone by design (the module text says so): these are the misses recall counts
    _bad("You have a month to ask for a refund.", REFUND_14, kind="month for days", miss=True),
    _bad("Affected customers are told within 3 days.", NOTIFY_48, kind="days for hours",
         miss=True),
    _bad("The Team price will rise to 15 USD per user per month.", PRICE_RISE,
         kind="inside a claimed range", miss=True),
    _bad("The cap can go up to three times the 12-month fees.", LIABILITY, kind="multiplier",
         miss=True),
)  # fmt: skip

ALL: tuple[FigureAnswer, ...] = CORRECT + CONTRADICTING
