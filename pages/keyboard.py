"""The pages' keys, one mechanism for every page that has them (Label, Audit, Adjudicate).

A page draws :func:`install` once per run. Its script (a constant, no user text in it) takes
the page's keys before Streamlit's own shortcut handlers see them, so none is lost, reordered
or silently dropped:

- a key is applied at once when the page is idle; pressed while the page (or a fragment of it)
  reruns, it waits for the rerun to end and is applied then, in the order pressed;
- a key goes to the button that shows it as its shortcut (``st.button(..., shortcut=...)``),
  or to an option of a group drawn in :func:`options` (pills or radio options, whose keys are
  shown on the options themselves);
- a key nothing on the page takes, or whose button cannot be used now, is refused with a
  notice in the corner, never dropped in silence (a disabled button's Streamlit shortcut is
  not even bound: that is how the Audit page lost Ctrl+Enter);
- once the rerun a key started has ended, its control is brought into view when it is off
  screen, so the message drawn next to it (saved, or why not) is seen;
- ``?`` opens the page's key list (the button drawn by :func:`help_button`);
- Ctrl/Cmd+Enter is taken before the focused element sees it (a focused pill would toggle
  itself and swallow it), except in a text field, where Streamlit commits the text first and
  then runs the button's shortcut itself;
- keys are the page's only where no text field has the focus; a checkbox or a radio option
  that has the focus after a click does not take them (Streamlit's own shortcuts ignore
  every key there), nor does a select whose list is closed (it would take a digit as a
  search, and Ctrl+Enter as its own Enter: how the Audit page lost keys after a stage was
  picked);
- C and R stay Streamlit's (clear caches, rerun) unless the page binds them.

(Before the page has first drawn, the script is not there yet: a key pressed then is
Streamlit's own, and nothing of the page can hold it.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import streamlit as st

from pages import ui

#: the class Streamlit gives a container keyed ``keys_opts_<letters>``: the script reads the
#: letters (the keys of the container's options, in order) from it
OPTS_PREFIX = "keys_opts_"
HELP_KEY_PREFIX = "keys_help_"

_SCRIPT = r"""<script>
(function () {
  if (window.__wbKeys) { return; }
  window.__wbKeys = true;
  window.__labelKeys = true;
  var queue = [], timer = null, clickedAt = 0, sawRun = true, idleTicks = 0, page = null;
  var follow = null;
  var TEXT_TYPES = ["", "text", "search", "number", "email", "password", "url", "tel", "date",
                    "time", "datetime-local", "month", "week"];
  function main() { return document.querySelector('[data-testid="stMain"]'); }
  function textField(t) {
    if (!t) { return false; }
    if (t.isContentEditable || t.tagName === "TEXTAREA") { return true; }
    return t.tagName === "INPUT" && t.getAttribute("role") !== "combobox" &&
      TEXT_TYPES.indexOf((t.getAttribute("type") || "").toLowerCase()) >= 0;
  }
  function combobox(t) {
    return t && t.tagName === "INPUT" && t.getAttribute("role") === "combobox";
  }
  function typing(t, label) {
    if (textField(t) || (t && t.tagName === "SELECT")) { return true; }
    // a select or multiselect whose list is closed (left with the focus after a pick) does
    // not swallow the page's keys; its list open, the key searches it
    if (combobox(t)) { return t.getAttribute("aria-expanded") === "true" || !target(label); }
    return false;
  }
  function running() {
    var app = document.querySelector('[data-testid="stApp"]');
    return !app || app.getAttribute("data-test-script-state") !== "notRunning";
  }
  function usesKeys(m) {
    return !!m.querySelector('[aria-label^="Shortcut "], [class*="st-key-keys_opts_"]');
  }
  function shortcut(label) {
    var m = main();
    if (!m) { return null; }
    var names = label === "Ctrl+Enter" ? ["Ctrl + Enter", "\u2318 + Enter"] : [label];
    for (var n = 0; n < names.length; n++) {
      var badges = m.querySelectorAll('[aria-label="Shortcut ' + names[n] + '"]');
      for (var i = 0; i < badges.length; i++) {
        var b = badges[i].closest("button");
        if (b) { return b; }
      }
    }
    return null;
  }
  function option(label) {
    var m = main();
    if (!m || label.length !== 1) { return null; }
    var boxes = m.querySelectorAll('[class*="st-key-keys_opts_"]');
    for (var i = 0; i < boxes.length; i++) {
      var found = /st-key-keys_opts_([a-z0-9]+)/i.exec(boxes[i].className);
      if (!found) { continue; }
      var at = found[1].toUpperCase().indexOf(label);
      if (at < 0) { continue; }
      var opts = boxes[i].querySelectorAll(
        '[data-testid="stButtonGroup"] button[aria-pressed], ' +
        '[data-testid="stButtonGroup"] button[role="radio"], [role="radiogroup"] label');
      return opts[at] || null;
    }
    return null;
  }
  function target(label) { return shortcut(label) || option(label); }
  function disabled(el) {
    if (el.disabled || el.getAttribute("aria-disabled") === "true") { return true; }
    var input = el.tagName === "LABEL" ? el.querySelector("input") : null;
    return !!(input && input.disabled);
  }
  function notice(text) {
    var box = document.createElement("div");
    box.setAttribute("role", "alert");
    box.textContent = text;
    box.style.cssText = "position:fixed;right:1rem;bottom:1rem;z-index:100000;padding:.6rem 1rem;" +
      "background:#fff3cd;color:#5c4400;border:1px solid #e0c36b;border-radius:.5rem;";
    document.body.appendChild(box);
    setTimeout(function () { box.remove(); }, 8000);
  }
  function stop() {
    queue = []; follow = null;
    if (timer !== null) { clearInterval(timer); }
    timer = null;
  }
  function reveal(label) {
    // what a key did is said next to its control: bring the control into view (centred, so
    // the message under it shows too) when it is off screen
    var el = target(label);
    if (!el) { return; }
    var r = el.getBoundingClientRect();
    if (r.top < 0 || r.bottom > window.innerHeight) { el.scrollIntoView({block: "center"}); }
  }
  function pump() {
    if (window.location.pathname !== page) { stop(); return; }
    if (running()) { sawRun = true; idleTicks = 0; return; }
    // after a click, wait for its rerun to show (or 1.5 s, a rerun too quick to see)
    if (!sawRun && Date.now() - clickedAt < 1500) { return; }
    if (follow !== null) { reveal(follow); follow = null; }
    if (!queue.length) { stop(); return; }
    var label = queue[0], el = target(label);
    if (el && !disabled(el)) {
      queue.shift();
      idleTicks = 0;
      // an option inside a form changes nothing on the server until the form is submitted
      var rerun = !(el.closest('[data-testid="stForm"]') &&
                    !el.closest('[data-testid="stFormSubmitButton"]'));
      clickedAt = Date.now(); sawRun = !rerun; follow = label;
      el.click();
      return;
    }
    idleTicks += 1;
    if (idleTicks >= 20) {
      queue.shift(); idleTicks = 0;
      notice(el ? "The key " + label + " was not applied: \u201c" + el.textContent.trim() +
                  "\u201d cannot be used now."
                : "The key " + label + " was not applied: nothing on the page takes it now.");
    }
  }
  document.addEventListener("keydown", function (e) {
    var m = main();
    if (!m || !usesKeys(m) || document.querySelector('[role="dialog"]')) { return; }
    var t = e.target, label = null;
    var plain = !e.ctrlKey && !e.metaKey && !e.altKey;
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !e.altKey) {
      if (textField(t)) { return; }
      label = "Ctrl+Enter";
    } else if (typing(t, /^[0-9a-z]$/i.test(e.key) ? e.key.toUpperCase() : "")) {
      return;
    } else if (e.key === "?" && plain) {
      var help = m.querySelector('[class*="st-key-keys_help_"] button');
      if (help) { e.preventDefault(); e.stopImmediatePropagation(); help.click(); }
      return;
    } else if (plain && !e.shiftKey && /^[0-9a-z]$/i.test(e.key)) {
      label = e.key.toUpperCase();
      // Streamlit's own C (clear caches) and R (rerun) stay Streamlit's unless the page
      // binds them
      if ((label === "C" || label === "R") && !target(label)) { return; }
    }
    if (label === null) { return; }
    e.preventDefault();
    e.stopImmediatePropagation();
    if (page !== window.location.pathname) { stop(); page = window.location.pathname; }
    queue.push(label);
    if (timer === null) { timer = setInterval(pump, 50); }
    pump();
  }, true);
})();
</script>"""


@dataclass(frozen=True)
class Shown:
    """A line of a page's key list."""

    key: str
    does: str


def install() -> None:
    """The page's keys go through the queue (once per browser tab; drawing it again is free)."""
    st.html(_SCRIPT, unsafe_allow_javascript=True)


def option_label(key: str, label: str) -> str:
    """An option's label with its key in front, as the key list shows it."""
    return f"{key.upper()} · {label}" if key else label


@contextmanager
def options(keys: Sequence[str], name: str) -> Iterator[None]:
    """Draw a pills or radio widget inside: its n-th option takes ``keys[n]`` (single letters or
    digits, each shown on its option with :func:`option_label`). ``name`` tells the groups of
    one page apart."""
    letters = "".join(keys).lower()
    if not letters.isalnum() or len(set(letters)) != len(letters):
        raise ValueError(f"option keys must be distinct letters or digits: {keys!r}")
    with st.container(key=f"{OPTS_PREFIX}{letters}_{name}", gap="small"):
        yield


def help_button(page: str, shortcut: str | None = None) -> bool:
    """The button that opens the page's key list (the `?` key presses it too)."""
    return st.button("Keys (?)", key=f"{HELP_KEY_PREFIX}{page}", shortcut=shortcut)


#: the height of a key list: with the dialog's title it fits a 720-pixel-high window
KEY_LIST_HEIGHT = 420


#: what every key list says above its keys
KEYS_NOTE = (
    "Keys work when no text field has the focus (Ctrl+Enter works everywhere). "
    "Esc closes this list."
)


def key_list(lines: Sequence[Shown]) -> None:
    """Every key of a page, each line readable whole: shown at full height in a wide dialog
    (the grid scrolls no line away) inside a frame that scrolls, so the dialog fits a
    1280x720 window."""
    st.caption(ui.plain(KEYS_NOTE))
    with st.container(height=KEY_LIST_HEIGHT if len(lines) > 10 else "content"):
        st.dataframe(
            {"key": [k.key for k in lines], "does": [k.does for k in lines]},
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(lines), len(lines)),
            column_config={
                "key": st.column_config.TextColumn("key", width="small"),
                "does": st.column_config.TextColumn("does", width="large"),
            },
        )
