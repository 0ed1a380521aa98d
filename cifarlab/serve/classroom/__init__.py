"""The classroom: classes with a code, pushed presets with locked knobs, per-class limits, a live
class board, a presenter view and a challenge with a public and a private leaderboard.

Every refusal is a ``ClassError`` (a ``JobError``) with a code below ``errors.class.`` and its
``field`` (catalogs ``locales/<lang>/errors_class.toml``); a bad preset is core's ConfigError,
one Problem per knob. Roles are checked here, on the serving side: a student calling an
instructor action through a tampered request is refused, not only spared the button.

Enforced on the serving side: ``JobQueue.submit`` asks ``enforce.check_submit`` about the
owner's class: a locked knob that differs from the pushed value, a run beyond the class limits
or the open challenge's rules is refused, the ``field`` naming the knob. A run submitted by a
member is recorded in ``class_runs``: the board and the challenge find it there.

No record handed out carries another person's id (``model``); what a student can see of others
is nicknames and run numbers. Joining is slowed down for a browser that keeps guessing codes,
never for one that is not (``ratelimit``); a nickname that looks like a classmate's, or holds
invisible or text-direction characters, is refused (``names``).

Everything lives in the run store (schema 3 and 5: ``classes``, ``class_members``,
``class_runs``, ``challenges``) and survives a restart; only the join limiter's counts are in
memory.

Modules: ``model`` (records, ClassError), ``names`` (codes, nicknames), ``tables`` (SQL),
``enforce`` (the submit hook, preset and limit checks), ``scoring`` (leaderboards, board, CSV),
``ratelimit`` (join attempts), ``facade`` (Classroom, get_classroom). A class experiment
(``Classroom.set_experiment``) gives each student one value of one knob, locked, round robin
in the order they joined; ``Classroom.experiment`` is the class's picture of it.
See docs/security.md.
"""
from cifarlab.serve.classroom.facade import Classroom, get_classroom
from cifarlab.serve.classroom.model import (MAX_VALUES, BoardRow, Challenge, ClassError, ClassInfo,
                                            ClassLimits, Experiment, ExperimentView, Goal,
                                            LeaderRow, Membership, Presenter, StudentView)

__all__ = ["Classroom", "get_classroom", "ClassError", "ClassInfo", "ClassLimits", "Goal",
           "Challenge", "Membership", "BoardRow", "Presenter", "LeaderRow", "StudentView",
           "Experiment", "ExperimentView", "MAX_VALUES"]
