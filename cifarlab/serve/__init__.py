"""Running work for many people: hosting settings, the run store, the job queue and its workers.

Built on ``cifarlab.core``; never imports ``cifarlab.lab`` (work kinds are registered by name).
"""
