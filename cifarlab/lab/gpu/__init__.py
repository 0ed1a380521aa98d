"""The CPU vs GPU lab: the training step timed on every device over batch size and width."""
