"""The CPU vs GPU page's parts (not pages): ``result``, the view of one timing result."""
