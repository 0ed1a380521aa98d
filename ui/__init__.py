"""The Streamlit helpers the pages share (not pages; only ``pages/``, ``app.py`` and this package
import streamlit): one concern a module, in layers checked by import-linter
(docs/architecture.md has the map).
"""
