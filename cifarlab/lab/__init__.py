"""One engine per page, named after its page: ``pages/gpu.py`` <-> ``cifarlab.lab.gpu``.

Built on ``cifarlab.core``; never imports ``cifarlab.serve`` or streamlit.
"""
