"""The document's language, readable code colours, the uploader's words in our language."""
from __future__ import annotations

import json

import streamlit as st

from cifarlab import i18n

# Streamlit's Prism palette is too light (down to 2.6:1; WCAG AA asks 4.5:1) and no theme option
# reaches it: the same hues, darker, !important (Streamlit's rule is as specific and later).
_CODE_COLOURS = {
    ".token.comment, .token.punctuation, .token.prolog, .token.doctype, .token.cdata": "#555867",
    ".token.attr-name, .token.property, .token.variable": "#15799e",
    ".token.boolean, .token.constant, .token.symbol": "#177233",
    ".token.number, .token.regex": "#246e69",
    ".token.string, .token.char, .token.attr-value": "#158237",
    ".token.operator, .token.entity, .token.decorator, .token.atrule": "#b45309",
    ".token.keyword, .token.tag, .token.function, .token.class-name, .token.selector": "#0068c9",
}
_CODE_CSS = "<style>" + "".join(
    ", ".join(f"code {sel.strip()}" for sel in sels.split(",")) + f" {{color: {colour} !important}}"
    for sels, colour in _CODE_COLOURS.items()) + (
    # the "running" indicator's English "Stop" button goes (runs have their own Stop)
    '[data-testid="stStatusWidget"] button {display: none !important}') + "</style>"


_ZONE = '[data-testid="stFileUploaderDropzone"]'


def accessible_document(code: str) -> None:
    """``<html lang>`` (Streamlit fixes "en": a reader would speak Spanish as English), code
    colours, the uploader's "Upload" in our word and accessible name; ``code``: a LANGUAGES key."""
    word = json.dumps(i18n.t("common.upload_button", code))   # a JS and a CSS string, quoted
    st.html(f"<script>document.documentElement.lang = '{code}';"
            "(function () {"
            f"window.cifarlabUploadWord = {word};"
            f"const name = () => document.querySelectorAll('{_ZONE} button').forEach(b => {{"
            "  if (b.getAttribute('aria-label') !== window.cifarlabUploadWord)"
            "    b.setAttribute('aria-label', window.cifarlabUploadWord); });"
            "name();"
            "if (!window.cifarlabUploadNamer) {"
            "  window.cifarlabUploadNamer = new MutationObserver(name);"
            "  window.cifarlabUploadNamer.observe(document.body, {childList: true, subtree: true});"
            "}})();</script>", unsafe_allow_javascript=True)
    # the "200MB per file" line goes: our own message answers a file over the limit
    st.html(_CODE_CSS + "<style>"
            f'{_ZONE} button [data-testid="stMarkdownContainer"] {{display: none !important}}'
            f"{_ZONE} button span[data-has-shortcut]::after "
            f"{{content: {word}; font-size: 0.875rem}}"
            '[data-testid="stFileUploaderDropzoneInstructions"] {display: none !important}'
            "</style>")
