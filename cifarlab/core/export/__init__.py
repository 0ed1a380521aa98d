"""Take a run home: script, notebook, TensorBoard logs, model card, zip (import each module)."""
