"""The classroom (docs/architecture.md): roles are checked here, on the serving side, so a
tampered request is refused, not only spared the button; submits by ``enforce.check_submit``."""
