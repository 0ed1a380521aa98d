"""The tutorial engine: config, shapes, model, data, devices, train, evaluate, checkpoint, export.

Imports only ``cifarlab.errors`` and ``cifarlab.i18n`` below it; never ``serve``, ``lab`` or
streamlit.
"""
