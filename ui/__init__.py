"""The Streamlit helpers the pages share (docs/architecture.md has their layers)."""
