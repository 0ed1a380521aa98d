"""The classroom: classes with a code, pushed presets with locked knobs, per-class limits, a live
class board, a presenter view, a class experiment and a challenge with a public and a private
leaderboard. Everything lives in the run store and survives a restart.

Roles are checked here, on the serving side: a student calling an instructor action through a
tampered request is refused, not only spared the button; ``JobQueue.submit`` asks
``enforce.check_submit`` about the owner's class, so a locked knob, the class limits and the
challenge's rules hold whatever the browser sends. Every refusal is a ``ClassError`` with a
code below ``errors.class.`` and the ``field`` it concerns. No record handed out carries
another person's id: students see nicknames and run numbers. See docs/security.md.
"""
from cifarlab.serve.classroom.facade import Classroom, get_classroom
from cifarlab.serve.classroom.model import (MAX_VALUES, BoardRow, ClassError, ClassLimits,
                                            Experiment, ExperimentView, Goal, LeaderRow,
                                            StudentView)

__all__ = ["Classroom", "get_classroom", "ClassError", "ClassLimits", "Goal", "BoardRow",
           "LeaderRow", "StudentView", "Experiment", "ExperimentView", "MAX_VALUES"]
