"""The whole classroom story in a real browser: one instructor and three students, each in a
browser context of their own (separate cookies: separate people), against one app server.

The instructor signs in with the passphrase, creates a class (code, join link, QR code) and
pushes a preset with locked knobs; the students join (one through the ``?class=`` link, two
through Home's box, after a bad nickname and a wrong code) in Spanish, Portuguese and English,
each their browser's language (the join link names none);
their Train pages show the pushed values, locked knobs disabled, and a tampered browser (the
``disabled`` attribute removed, another value typed) meets the server's refusal; a second push
reaches an open Train page on its next rerun. A class experiment on the learning rate gives each
student a value of their own, locked. Then a challenge opens, the students train, the
runs appear on the live board, the instructor cancels one and pins another (the presenter
view: no sidebar, the class code and QR code, the leaderboard), the public leaderboard ranks
the students as the run store's own half-test accuracies do, closing reveals the private
board, and both boards download as CSV; the experiment's picture is on the projector and on a
student's Home, and its runs download as CSV.

Tiny runs (300 images, one epoch, the fast pipeline); screenshots under test-artifacts.
"""
from __future__ import annotations

import csv
import io
import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from browser_support import (PASSPHRASE, POLL_MS, page_problems, screenshot, wait_idle,
                             wait_on_progress)
from cifarlab import i18n

pytestmark = pytest.mark.browser

EN = i18n.translator("en")
STUDENTS = (("Ana", "es"), ("Bo", "pt"), ("Cy", "en"))
LOCALES = ("en-US", "es-AR", "pt-BR", "en-GB")   # the browsers' own: instructor, then students


def store(server):
    from cifarlab.serve.store import RunStore

    return RunStore(server.home / "runs.db", server.home / "checkpoints")


def main(page):
    return page.get_by_test_id("stMain")


def nav(page, title: str):
    return page.get_by_test_id("stSidebarNav").get_by_role("link", name=title, exact=True)


def settle(page):
    wait_idle(page)
    assert not page_problems(page), page_problems(page)


def settle_console(page):
    """The console's board and leaderboard poll on their own: wait for a quiet moment, but a
    fragment found busy on a loaded machine is no failure (each step then waits for its text)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        wait_idle(page, timeout_ms=20_000)
    except PlaywrightTimeout:
        pass
    assert not page_problems(page), page_problems(page)


def sid_of(page) -> str:
    page.wait_for_function("() => new URLSearchParams(location.search).get('sid')")
    return parse_qs(urlparse(page.url).query)["sid"][0]


# ----------------------------------------------------------------------------- instructor
def sign_in(page, url: str) -> None:
    # on Home ("/"), the first session of a fresh server: there the form's submission used to
    # be lost (the sidebar's widgets had other ids on the session's first run)
    page.goto(url + "/?lang=en")
    settle(page)
    bar = page.get_by_test_id("stSidebar")
    bar.get_by_text(EN("identity.instructor_sign_in")).click()
    box = bar.get_by_label(EN("identity.passphrase"))
    box.fill(PASSPHRASE)
    box.press("Enter")
    bar.get_by_text(EN("identity.instructor_signed_in")).wait_for()
    nav(page, EN("nav.classroom")).click()
    settle(page)


def tab(page, key: str) -> None:
    main(page).get_by_role("tab", name=EN(key), exact=True).click()
    page.wait_for_timeout(200)


def push_preset(page, values: dict[str, str], locks: list[str], select: dict | None = None):
    tab(page, "classroom.preset.title")
    form = main(page).get_by_test_id("stForm").filter(has_text=EN("classroom.preset.push"))
    for label, value in values.items():
        form.get_by_label(label, exact=True).fill(value)
    for option in (select or {}).values():   # a choice: a radio button, its label in words
        form.get_by_text(option, exact=True).click()
    for label in locks:
        box = form.get_by_role("checkbox", name=EN("classroom.preset.lock", knob=label),
                               exact=True)   # "Lock Learning rate" is no "... rate schedule"
        if not box.is_checked():
            box.check(force=True)
    form.get_by_role("button", name=EN("classroom.preset.push"), exact=True).click()
    settle_console(page)
    main(page).get_by_text(re.compile(r"Pushed \(version \d+\)")).wait_for()


# ------------------------------------------------------------------------------- students
def join(page, code: str, nickname: str, lang: str) -> None:
    t = i18n.translator(lang)
    page.get_by_label(t("classroom.join.code"), exact=True).fill(code)
    page.get_by_label(t("classroom.join.nickname"), exact=True).fill(nickname)
    page.get_by_role("button", name=t("classroom.join.button"), exact=True).click()
    settle(page)


def open_train(page, lang: str) -> None:
    nav(page, i18n.t("nav.train", lang)).click()
    settle(page)


def press_train(page, lang: str) -> None:
    main(page).get_by_role("button", name=i18n.t("train.start", lang), exact=True).click()
    settle(page)


def knob(page, lang: str, key: str):
    return main(page).get_by_label(i18n.t(key, lang), exact=True)


def set_images(page, lang: str, n: int) -> None:
    box = knob(page, lang, "common.train_subset")
    box.fill(str(n))
    box.press("Enter")
    settle(page)
    expect(box).to_have_value(str(n))


# ------------------------------------------------------------------------- a tampered browser
TAMPER: dict[str, int] = {}   # widget key -> the value a tampered browser sends instead


def tampering(route) -> None:
    """Between a page and the server: while ``TAMPER`` names widgets, rewrite their values in
    the page's messages (Streamlit's BackMsg protobuf), as a hand-edited client would, whatever
    the page drew (a disabled widget included)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    server = route.connect_to_server()

    def to_server(message) -> None:
        if TAMPER and isinstance(message, bytes):
            msg = BackMsg()
            msg.ParseFromString(message)
            if msg.WhichOneof("type") == "rerun_script":
                for w in msg.rerun_script.widget_states.widgets:
                    key = next((k for k in TAMPER if w.id.endswith("-" + k)), None)
                    if key is not None:
                        w.int_value = TAMPER[key]
                message = msg.SerializeToString()
        server.send(message)

    route.on_message(to_server)


# ---------------------------------------------------------------------------- leaderboards
def expected_order(server, code: str, which: str) -> list[str]:
    """The students by their best run's accuracy on ``which`` half of the test set, read from
    the run store itself (each run's eval event), ties to the earlier finish: what the board
    must show, computed here without the engine's scoring."""
    from cifarlab.serve.classroom.facade import Classroom
    from cifarlab.serve.identity import Person

    s = store(server)
    rows = Classroom(s).board(Person("test:checker", "checker", True), code)
    best: dict[str, tuple] = {}
    for r in rows:
        run = s.get(r.run_id)
        if run.status != "done":
            continue
        acc = s.events(r.run_id, kinds=["eval"])[-1].data["half_accuracies"][which]
        key = (-acc, run.finished_at)
        if r.nickname not in best or key < best[r.nickname]:
            best[r.nickname] = key
    return sorted(best, key=best.get)


def board_nicknames(page, which_label: str) -> list[str]:
    """The nickname column of the leaderboard under ``which_label``, top to bottom."""
    block = main(page).get_by_test_id("stVerticalBlock").filter(
        has=page.get_by_text(which_label, exact=True)).last
    table = block.get_by_test_id("stTable").first
    table.wait_for()
    names = {n for n, _ in STUDENTS}
    return [c for c in table.locator("tbody td").all_inner_texts() if c in names]


def board_button(page, key: str):
    """A button of the live board, once its polling fragment has finished drawing it (see
    run_picker)."""
    button = main(page).get_by_role("button", name=EN(key), exact=True)
    expect(button).to_have_count(1, timeout=60_000)
    return button


def choose(page, box, option) -> None:
    """Pick ``option`` (its text, or a pattern of it) in a select box on the console, whose
    polling fragments may redraw the page (and close the open list, or replace the option as
    a run's progress changes its label) between the two clicks: then open it again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(5):
        box.click()
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=10_000)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    expect(box).to_have_value(option)


def run_picker(page):
    """The board's run picker, once the polling fragment has finished drawing it: while it
    reruns, the browser can briefly hold the old picker beside the new one."""
    pick = main(page).get_by_label(EN("classroom.board.pick"), exact=True)
    expect(pick).to_have_count(1, timeout=60_000)
    return pick


def board_runs(page) -> list[str]:
    """The nicknames of the runs on the live board, from its run picker (the board itself is
    drawn on a canvas): one per run, newest first."""
    if not main(page).get_by_label(EN("classroom.board.pick"), exact=True).count():
        return []
    pick = run_picker(page)
    pick.click()
    options = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    return [o.split(" · ")[0] for o in options]


def download_csv(page, label: str) -> list[dict]:
    with page.expect_download() as info:
        main(page).get_by_role("button", name=label, exact=True).click()
    return list(csv.DictReader(io.StringIO(open(info.value.path(), encoding="utf-8").read())))


# ------------------------------------------------------------------------------ the story
def test_the_whole_classroom_story(server, browser):
    url = server.url
    contexts = [browser.new_context(viewport={"width": 1400, "height": 1100}, locale=locale)
                for locale in LOCALES]
    try:
        contexts[1].route_web_socket(re.compile(r".*/_stcore/stream"), tampering)
        teacher = contexts[0].new_page()
        students = [c.new_page() for c in contexts[1:]]
        try:
            story(server, url, teacher, students)
        except Exception:   # what each person saw, for the CI artefacts
            for i, page in enumerate([teacher, *students]):
                screenshot(page, f"classroom-failed-{i}")
            raise
    finally:
        for c in contexts:
            c.close()


def story(server, url, teacher, students):
    # -- the instructor creates a class: its code, join link and QR code (with alt text)
    sign_in(teacher, url)
    main(teacher).get_by_label(EN("classroom.title_label")).fill("Period 3")
    main(teacher).get_by_role("button", name=EN("classroom.create_button"), exact=True).click()
    settle_console(teacher)
    text = main(teacher).inner_text()
    code = re.search(r"([0-9A-Z]{3}-[0-9A-Z]{3})", text.split(EN("classroom.code_caption"))[1])[1]
    link = re.search(r"(https?://\S+\?class=\S+)", text)[1]
    assert link == f"{url}/?class={code}"   # no language: each student's browser picks theirs
    assert main(teacher).get_by_role("img", name=EN("classroom.qr_alt", code=code)).count() == 1

    # -- a preset: tiny runs, epochs and the learning rate locked
    push_preset(teacher, {EN("common.epochs"): "1", EN("common.lr"): "0.01",
                          EN("common.batch_size"): "32", EN("common.train_subset"): "300",
                          EN("common.num_workers"): "0"},
                locks=[EN("common.epochs"), EN("common.lr")],
                select={EN("common.pipeline"): EN("common.pipeline_fast")})
    screenshot(teacher, "classroom-console-en")

    # -- students join: Ana from the link (after two bad nicknames), Bo and Cy from Home's box
    ana, bo, cy = students
    es, pt = i18n.translator("es"), i18n.translator("pt")
    ana.goto(link)   # an es-AR browser: Spanish
    settle(ana)
    assert ana.get_by_label(es("classroom.join.code"), exact=True).input_value() == code
    join(ana, code, "<b>Ana</b>", "es")
    ana.get_by_text(i18n.t("errors.class.nickname_markup", "es")).wait_for()
    join(ana, code, "A" * 500, "es")
    ana.get_by_text(i18n.t("errors.class.nickname_length", "es", n=24, got=500)).wait_for()
    join(ana, code, "Ana", "es")
    ana.get_by_text(es("classroom.join.joined", title="Period 3", nickname="Ana")).wait_for()
    screenshot(ana, "classroom-home-joined-es")

    bo.goto(url)     # a pt-BR browser opens the bare address: Portuguese
    settle(bo)
    join(bo, code, "Bo", "pt")
    bo.get_by_text(pt("classroom.join.joined", title="Period 3", nickname="Bo")).wait_for()
    cy.goto(f"{url}/?lang=en")
    settle(cy)
    join(cy, "blue-fox-99", "Cy", "en")             # a wrong code first
    cy.get_by_text(i18n.t("errors.class.unknown_code", "en")).wait_for()
    join(cy, code.lower().replace("-", " "), "Cy", "en")   # read aloud, typed loosely
    cy.get_by_text(EN("classroom.join.joined", title="Period 3", nickname="Cy")).wait_for()

    # -- Train shows the pushed values; the locked knobs are disabled
    for page, (_, lang) in zip(students, STUDENTS):
        open_train(page, lang)
        # expect(): retried, since a page just opened may still be drawing its widgets
        epochs, lr = knob(page, lang, "common.epochs"), knob(page, lang, "common.lr")
        expect(epochs).to_have_value("1")
        expect(epochs).to_be_disabled()
        expect(lr).to_have_value(i18n.number(0.01, lang))
        expect(lr).to_be_disabled()
        expect(knob(page, lang, "common.train_subset")).to_have_value("300")
        expect(knob(page, lang, "common.train_subset")).to_be_enabled()
    screenshot(bo, "classroom-train-locked-pt")

    # -- a tampered browser: Ana's Train click reaches the server with epochs = 3 (rewritten in
    # the websocket message itself, below the page): the server refuses it
    TAMPER["train_epochs"] = 3
    press_train(ana, "es")
    TAMPER.clear()
    refusal = i18n.t("errors.class.knob_locked", "es", knob=i18n.t("common.epochs", "es"),
                     value=1)
    ana.get_by_text(refusal).first.wait_for()
    assert store(server).list_runs(session=sid_of(ana)) == []      # nothing was queued
    screenshot(ana, "classroom-train-refused-es")

    # -- a second push reaches Bo's open Train page on its next rerun, without a reload
    push_preset(teacher, {EN("common.train_subset"): "256"}, locks=[])
    knob(bo, "pt", "train.run_name").fill("primeira")
    knob(bo, "pt", "train.run_name").press("Enter")
    settle(bo)
    expect(knob(bo, "pt", "common.train_subset")).to_have_value("256")

    # -- a class experiment: each student a learning rate, in the order they joined, locked
    tab(teacher, "classroom.experiment.title")
    form = main(teacher).get_by_test_id("stForm").filter(
        has_text=EN("classroom.experiment.start"))
    choose(teacher, form.get_by_label(EN("classroom.experiment.knob"), exact=True),
           EN("common.lr"))
    form.get_by_label(EN("classroom.experiment.values"), exact=True).fill("0.01; 0,001")
    form.get_by_role("button", name=EN("classroom.experiment.start"), exact=True).click()
    settle_console(teacher)
    main(teacher).get_by_text(re.compile(r"Experiment set \(version \d+\)")).wait_for()
    assigned = dict(zip(("Ana", "Bo", "Cy"), (0.001, 0.01, 0.001)))

    # -- a challenge opens; every student trains; the runs appear on the live board
    tab(teacher, "classroom.challenge.title")
    main(teacher).get_by_role("button", name=EN("classroom.challenge.open"), exact=True).click()
    settle_console(teacher)
    main(teacher).get_by_text(EN("classroom.challenge.opened")).wait_for()
    for page, (name, lang) in zip(students, STUDENTS):
        open_train(page, lang)
        expect(knob(page, lang, "common.lr")).to_have_value(i18n.number(assigned[name], lang))
        if name == "Cy":   # a long run (the server's most images): still going when cancelled,
            set_images(page, lang, 20000)   # however quickly the others finish
        press_train(page, lang)
    tab(teacher, "classroom.board.title")
    board = main(teacher).get_by_test_id("stDataFrame").first
    board.wait_for()
    wait_on_progress(lambda: sorted(board_runs(teacher)) == ["Ana", "Bo", "Cy"],
                     lambda: board_runs(teacher), page=teacher)
    screenshot(teacher, "classroom-board-en")

    # -- the instructor cancels Cy's run (queued behind the others on the one CPU slot)
    cy_run = next(r for r in store(server).list_runs(session=sid_of(cy)))
    choose(teacher, run_picker(teacher), re.compile(r"^Cy · "))
    board_button(teacher, "classroom.board.cancel").click()
    wait_on_progress(lambda: store(server).get(cy_run.id).status == "cancelled",
                     lambda: store(server).get(cy_run.id).status, page=teacher)
    cy.get_by_text(EN("train.cancelled_queued")).or_(
        cy.get_by_text(re.compile(r"^Stopped after \d+ of"))).first.wait_for()

    # -- pin Ana's run: the presenter view shows its chart large
    choose(teacher, run_picker(teacher), re.compile(r"^Ana · "))
    board_button(teacher, "classroom.board.pin").click()
    main(teacher).get_by_text(EN("classroom.board.pinned", nickname="Ana")).wait_for()
    board_button(teacher, "classroom.presenter.open").click()
    # no settle(): the presenter's fragment polls, and on a loaded machine it is busy often
    # (the board's "Pinned: Ana's run …" line may still be there as the view opens)
    main(teacher).get_by_role("heading", name=re.compile(
        "^" + re.escape(EN("classroom.presenter.heading", nickname="Ana")))).wait_for()

    # -- Cy trains again, a tiny run; wait until every run of the class has finished
    set_images(cy, "en", 256)
    press_train(cy, "en")

    sids = [sid_of(page) for page in students]

    def statuses():   # the class's runs (the app server is shared with other tests)
        return sorted(r.status for sid in sids for r in store(server).list_runs(session=sid))

    wait_on_progress(lambda: all(s in ("done", "cancelled", "failed") for s in statuses()),
                     statuses, page=teacher)
    assert statuses().count("done") == 3, statuses()
    teacher.locator(".js-plotly-plot").first.wait_for()
    # a projector's page: full width, nothing personal (no sidebar with the instructor's link
    # or sign-out, no session id in the address bar), the class code and its QR code
    expect(teacher.get_by_test_id("stSidebar")).to_have_count(0)
    assert "sid" not in parse_qs(urlparse(teacher.url).query)
    expect(main(teacher).get_by_role("heading", name=code, exact=True)).to_be_visible()
    expect(main(teacher).get_by_role("img", name=EN("classroom.qr_alt", code=code))).to_be_visible()
    teacher.set_viewport_size({"width": 1920, "height": 1080})
    screenshot(teacher, "classroom-presenter-en")
    views = main(teacher).get_by_test_id("stButtonGroup")
    views.get_by_text(EN("classroom.presenter.show_leaders"), exact=True).click()
    main(teacher).get_by_test_id("stTable").filter(has_text="Ana").wait_for()
    screenshot(teacher, "classroom-presenter-leaders-en")
    views.get_by_text(EN("classroom.presenter.show_experiment"), exact=True).click()
    main(teacher).get_by_text(re.compile(r"The class compares Learning rate")).wait_for()
    main(teacher).locator(".js-plotly-plot").first.wait_for()
    screenshot(teacher, "classroom-presenter-experiment-en")
    teacher.set_viewport_size({"width": 1400, "height": 1100})
    main(teacher).get_by_role("button", name=EN("classroom.presenter.back"), exact=True).click()
    main(teacher).get_by_role("tab", name=EN("classroom.challenge.title")).wait_for()

    # -- the public leaderboard ranks them as the run store's public-half accuracies do
    public = expected_order(server, code, "public")
    assert public and sorted(public) == ["Ana", "Bo", "Cy"]
    tab(teacher, "classroom.challenge.title")
    teacher.wait_for_function(
        "names => [...document.querySelectorAll('[data-testid=\"stTable\"]')].some("
        "t => names.every(n => t.innerText.includes(n)))", arg=public, polling=POLL_MS)
    assert board_nicknames(teacher, EN("classroom.challenge.public")) == public
    rows = download_csv(teacher, EN("classroom.challenge.download",
                                    board=EN("classroom.challenge.public")))
    assert [r["nickname"] for r in rows] == public

    # -- each student sees their own place (Ana, in Spanish, on Home)
    nav(ana, es("nav.home")).click()
    settle(ana)
    ana.get_by_text(es("classroom.banner.rank", rank=public.index("Ana") + 1, n=3)).wait_for()
    screenshot(ana, "classroom-home-rank-es")
    ana.get_by_text(re.compile(r"entrenas con Tasa de aprendizaje = 0,001")).first.wait_for()
    main(ana).get_by_text(re.compile(r"^La clase compara Tasa de aprendizaje")).wait_for()
    main(ana).locator(".js-plotly-plot").first.wait_for()      # where her run sits
    screenshot(ana, "classroom-home-experiment-es")

    # -- closing reveals the private board; both download as CSV
    main(teacher).get_by_role("button", name=EN("classroom.challenge.close"), exact=True).click()
    settle_console(teacher)
    main(teacher).get_by_text(EN("classroom.challenge.closed")).wait_for()
    private = expected_order(server, code, "private")
    assert board_nicknames(teacher, EN("classroom.challenge.private")) == private
    rows = download_csv(teacher, EN("classroom.challenge.download",
                                    board=EN("classroom.challenge.private")))
    assert [r["nickname"] for r in rows] == private
    assert {r["board"] for r in rows} == {"private"}
    # nicknames and run numbers, never a student's session id (it would act for them)
    assert all(r["run"].isdigit() for r in rows) and "person" not in rows[0]
    assert not any(sid_of(s) in repr(rows) for s in students)
    screenshot(teacher, "classroom-challenge-closed-en")
    tab(teacher, "classroom.experiment.title")
    rows = download_csv(teacher, EN("classroom.experiment.csv"))
    assert {(r["nickname"], float(r["value"])) for r in rows} == set(assigned.items())
    assert sorted(r["status"] for r in rows) == sorted(statuses())
    nav(bo, pt("nav.home")).click()
    settle(bo)
    bo.get_by_text(pt("classroom.banner.revealed")).wait_for()
    screenshot(bo, "classroom-home-revealed-pt")
