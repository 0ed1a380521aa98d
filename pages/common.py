"""A temporary re-export for pages/train.py, pages/speed.py and pages/classroom_parts/student.py,
which the Train form's branch moves onto ``ui`` itself; removed at that merge."""
from ui.data import queue
from ui.internals import set_fragment_interval
from ui.language import dur, lang, localize, num, pct, show_error, translator
from ui.nav import lesson
from ui.session import session_id
from ui.signin import owner_id, person

__all__ = ["queue", "set_fragment_interval", "dur", "lang", "localize", "num", "pct",
           "show_error", "translator", "lesson", "session_id", "owner_id", "person"]
