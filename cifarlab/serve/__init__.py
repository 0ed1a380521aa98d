"""Running work for many people: hosting settings, the run store, the job queue and its workers.
Never imports ``cifarlab.lab`` (work kinds are registered by name)."""
