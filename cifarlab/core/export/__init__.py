"""Take a run home: the script that repeats it, the notebook, TensorBoard logs, a model card and
the zip of them all. Callers import the module they need (the notebook, logs and zip load
nbformat and tensorboard)."""
