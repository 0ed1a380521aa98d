"""The CPU vs GPU lab: the training step timed honestly on every device, swept over batch size
and width; speed-ups, crossovers and what a GPU would add, in the student's language."""
