"""The classroom: classes with a code, pushed presets with locked knobs, per-class limits, a live
class board, a presenter view, a class experiment and a challenge with a public and a private
leaderboard, all in the run store. Roles are checked here, on the serving side (a tampered
request is refused, not only spared the button), and submits by ``enforce.check_submit``;
records never carry another person's id (``model``). See docs/security.md.
"""
from cifarlab.serve.classroom.facade import Classroom, get_classroom
from cifarlab.serve.classroom.model import (MAX_VALUES, BoardRow, ClassError, ClassLimits,
                                            Experiment, ExperimentView, Goal, LeaderRow,
                                            StudentView)

__all__ = ["Classroom", "get_classroom", "ClassError", "ClassLimits", "Goal", "BoardRow",
           "LeaderRow", "StudentView", "Experiment", "ExperimentView", "MAX_VALUES"]
