"""The classroom: classes with a code, pushed presets with locked knobs, per-class limits, a live
class board, a presenter view and a challenge with a public and a private leaderboard.

    cr = get_classroom(queue)                    # one per process, on the queue's run store
    cr = Classroom(store)                        # or on any RunStore (tests, benchmarks)

    # instructors: every call checks by.instructor, else ClassError("class.not_instructor")
    info = cr.create_class(by, "Period 3")       # info.code like "blue-fox-42", open
    cr.set_open(by, code, False)                 # closed to new members
    cr.my_classes(by)                            # (everyone=True: every class)
    info = cr.push_preset(by, code, {"epochs": 1, "lr": 0.01}, locked=["lr"],
                          expected_version=info.version)   # stale version: ClassError
    info = cr.set_limits(by, code, ClassLimits(max_epochs=3, max_train_images=5000,
                         devices=("cpu",), max_runs_per_student=5), info.version)
    cr.board(by, code)                           # [BoardRow]: nickname, run number, status,
                                                 #   queue position, a small loss curve, accuracy
    cr.cancel_run(by, code, run_id)              # only runs of that class
    cr.pin(by, code, run_id)                     # None unpins
    cr.presenter(viewer, code)                   # Presenter | None: the pinned run, large
    cr.open_challenge(by, code, Goal("best_accuracy", max_epochs=2, device="cpu"))
    cr.open_challenge(by, code, Goal("fastest_to", target=0.5))
    cr.close_challenge(by, code)                 # reveals the private board
    cr.leaderboard(viewer, code, "public")       # [LeaderRow], "private" too
    cr.leaderboard_csv(by, code, "private")      # str: nicknames and run numbers, no ids

    # students (a Person; ``person.id`` owns their runs)
    m = cr.join(person, "blue-fox-42", "Ana", client_key)   # Membership
    cr.membership(person); cr.leave(person)
    view = cr.student_view(person)               # StudentView | None: preset, locked knobs
                                                 #   (view.locked_reason(lang)), limits,
                                                 #   challenge, own rank

Every refusal is a ``ClassError`` (a ``JobError``) with a code below ``errors.class.`` and its
``field`` (catalogs ``locales/<lang>/errors_class.toml``); a bad preset is core's ConfigError,
one Problem per knob. Roles are checked here, on the serving side: a student calling an
instructor action through a tampered request is refused, not only spared the button.

Enforced on the serving side: ``JobQueue.submit`` asks ``enforce.check_submit`` (through
``serve.admission.check_class``) about the owner's class: a locked knob that differs from the
pushed value, a run beyond the class limits or the open challenge's rules is refused, the
``field`` naming the knob. A run submitted by a member is recorded in ``class_runs``: the board
and the challenge find it there.

No record handed out carries another person's id (``model``); what a student can see of others
is nicknames and run numbers. Joining is slowed down for a browser that keeps guessing codes,
never for one that is not (``ratelimit``); a nickname that looks like a classmate's, or holds
invisible or text-direction characters, is refused (``names``).

Everything lives in the run store (schema 3: ``classes``, ``class_members``, ``class_runs``,
``challenges``) and survives a restart; only the join limiter's counts are in memory.

Modules: ``model`` (records, ClassError), ``names`` (codes, nicknames), ``tables`` (SQL),
``enforce`` (the submit hook, preset and limit checks), ``scoring`` (leaderboards, board, CSV),
``ratelimit`` (join attempts), ``facade`` (Classroom, get_classroom). See docs/security.md.
"""
from cifarlab.serve.classroom.facade import Classroom, get_classroom
from cifarlab.serve.classroom.model import (BoardRow, Challenge, ClassError, ClassInfo,
                                            ClassLimits, Goal, LeaderRow, Membership, Presenter,
                                            StudentView)

__all__ = ["Classroom", "get_classroom", "ClassError", "ClassInfo", "ClassLimits", "Goal",
           "Challenge", "Membership", "BoardRow", "Presenter", "LeaderRow", "StudentView"]
