"""One engine per page, named after it (``pages/gpu.py`` <-> ``cifarlab.lab.gpu``)."""
