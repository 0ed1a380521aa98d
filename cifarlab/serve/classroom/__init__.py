"""The classroom (docs/architecture.md): roles are checked here, on the serving side, so a
tampered request is refused, not only spared the button; submits by ``enforce.check_submit``."""
from cifarlab.serve.classroom.facade import Classroom, get_classroom
from cifarlab.serve.classroom.model import (MAX_VALUES, BoardRow, ClassError, ClassLimits,
                                            Experiment, ExperimentView, Goal, LeaderRow,
                                            StudentView)

__all__ = ["Classroom", "get_classroom", "ClassError", "ClassLimits", "Goal", "BoardRow",
           "LeaderRow", "StudentView", "Experiment", "ExperimentView", "MAX_VALUES"]
