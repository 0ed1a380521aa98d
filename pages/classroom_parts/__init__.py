"""The classroom page's parts (not pages): ``live`` (the board, the presenter view, the
challenge) and ``student`` (what Home and Train show of a student's class)."""
