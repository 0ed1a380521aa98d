"""No name a user types ever becomes code or markup in what a run exports: the script, the
notebook, the model card and the zip (cifarlab.core.export, ``python -m cifarlab export``).

A name reaches the exported code only inside a string literal or a one-line comment, so the
code's tokens are the same whatever the name; the property test below checks that over
arbitrary names with the tokenize module. The model card shows a name as its characters.
"""
from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
import zipfile

import nbformat
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings, strategies as st

from cifarlab.cli import main
from cifarlab.core import checkpoint
from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.core.export.bundle import bundle_bytes
from cifarlab.core.export.card import model_card
from cifarlab.core.export.record import RunRecord
from cifarlab.core.export.notebook import notebook_json, source_note
from cifarlab.core.export.render import export_script
from cifarlab.core.model import Net as LabNet
from tutorial_net import Net as TutorialNet

HOSTILE = '<<settings>>;__import__("os").system("touch PWNED");raise SystemExit#'
# every character str.splitlines() breaks a line at: an editor or a notebook may too
BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
RUN_ID = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
# a run that uses every trick, so every branch of the templates is rendered
TRICKY = TrainConfig(pipeline="fast", net="airbench", augment="flip_translate", tta=True,
                     schedule="onecycle", label_smoothing=0.1, nesterov=True, weight_decay=5e-4)


def code_tokens(source: str) -> list[tuple[int, str]]:
    """The token stream with the text of every string and comment left out."""
    return [(tok.type, "" if tok.type in (tokenize.STRING, tokenize.COMMENT) else tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)]


def code_cells(notebook_text: str) -> list[str]:
    nb = nbformat.reads(notebook_text, as_version=4)
    nbformat.validate(nb)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def _names_called(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def _saved(tmp_path, name: str):
    config = TrainConfig(device="cpu")
    path = tmp_path / f"{name}.pth"
    checkpoint.save(path, LabNet(config.model), config, CIFAR10_CLASSES, {"test_accuracy": 0.5})
    return path


# -- the reported exploit ------------------------------------------------------------------
@pytest.mark.integration   # a process of its own
def test_a_checkpoints_name_never_runs_from_the_exported_script(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    bad, good = _saved(tmp_path / "a", HOSTILE), _saved(tmp_path / "b", "run")
    assert main(["export", str(bad), "-o", str(tmp_path / "a" / "out.py")]) == 0
    assert main(["export", str(good), "-o", str(tmp_path / "b" / "out.py")]) == 0
    capsys.readouterr()
    text = (tmp_path / "a" / "out.py").read_text()
    assert code_tokens(text) == code_tokens((tmp_path / "b" / "out.py").read_text())
    assert "__import__" not in _names_called(text)
    # its definitions and settings run (the training waits under __main__): nothing else does
    proc = subprocess.run([sys.executable, "-c", "import runpy; m = runpy.run_path('out.py', "
                           "run_name='exported'); print(m['EPOCHS'], m['CUDA_GRAPHS'])"],
                          cwd=tmp_path / "a", capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.split() == ["2", "False"], proc.stderr[-2000:]
    assert not (tmp_path / "a" / "PWNED").exists()


@pytest.mark.parametrize("suffix", [".ipynb", ".zip"])
def test_a_checkpoints_name_never_becomes_code_in_the_notebook(tmp_path, capsys, suffix):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    bad, good = _saved(tmp_path / "a", HOSTILE), _saved(tmp_path / "b", "run")
    cells = []
    for path in (bad, good):
        out = path.with_name("out" + suffix)
        assert main(["export", str(path), "-o", str(out)]) == 0
        if suffix == ".zip":
            with zipfile.ZipFile(out) as z:
                (nb,) = [n for n in z.namelist() if n.endswith(".ipynb")]
                cells.append(code_cells(z.read(nb).decode("utf-8")))
        else:
            cells.append(code_cells(out.read_text()))
    capsys.readouterr()
    assert len(cells[0]) == len(cells[1]) > 10
    for ours, plain in zip(*cells, strict=True):
        assert code_tokens(ours) == code_tokens(plain), ours[:300]
        assert "__import__" not in _names_called(ours)


def test_the_runs_pages_zip_keeps_a_hostile_run_name_out_of_code_and_markup():
    """The Runs page's "Take your run home" zip of a run named on the Train page."""
    name = HOSTILE + "\u2028EPOCHS = 1 <img src=x onerror=alert(1)> **bold** [a](http://x)"
    record = RunRecord(TRICKY, LabNet(TRICKY.model).state_dict(), tuple(CIFAR10_CLASSES),
                       run_id=RUN_ID, name=name)
    plain = RunRecord(TRICKY, record.state_dict, tuple(CIFAR10_CLASSES), run_id=RUN_ID,
                      name="run")
    got = []
    for run in (record, plain):
        with zipfile.ZipFile(io.BytesIO(bundle_bytes(run, "es"))) as z:
            (nb,) = [n for n in z.namelist() if n.endswith(".ipynb")]
            cells = nbformat.reads(z.read(nb).decode("utf-8"), 4).cells
            card = z.read(next(n for n in z.namelist() if n.endswith("README.md"))).decode()
        got.append(([code_tokens(c.source) for c in cells if c.cell_type == "code"],
                    [c.source for c in cells if c.cell_type == "markdown"], card))
    (code, markdown, card), (plain_code, plain_markdown, plain_card) = got
    assert code == plain_code
    _assert_shown_as_text(card, plain_card)
    assert len(markdown) == len(plain_markdown)
    _assert_shown_as_text(markdown[0], plain_markdown[0])   # the title names the run
    for ours, theirs in zip(markdown, plain_markdown, strict=True):
        assert _markup(ours) == _markup(theirs)


# -- any name ------------------------------------------------------------------------------
SPECIALS = [*BREAKS, '"', "'", '"""', "'''", "\\", "#", "<<settings>>", "<<net>>", "{{ 1 }}",
            "{{", "}}", "{%", "%}", "{# x #}", "# %% train", "\x00", "\u202e", "\t", ";",
            "import os", "):", "\\N{DIGIT ONE}", "`", "<", "&", "|", "*", "$"]
names = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(SPECIALS)),
                 max_size=8).map("".join)


@pytest.fixture(scope="module")
def plain_exports():
    """The exports of a run named plainly, keyed by (config, lang): what every name's must
    match token for token."""
    out = {}
    for config, lang in ((TrainConfig(), "en"), (TRICKY, "pt")):
        record = RunRecord(config, {}, tuple(CIFAR10_CLASSES), run_id=RUN_ID, name="run",
                           results={"test_accuracy": 0.5})
        note = source_note(record)
        out[config, lang] = (code_tokens(export_script(config, note, script_name="run.py")),
                             [code_tokens(c) for c in code_cells(notebook_json(record, lang))])
    return out


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=names, tricky=st.booleans())
@example(name=HOSTILE, tricky=False)
@example(name="x" + BREAKS.join("EPOCHS = 99 ") + '"""\\', tricky=True)
def test_any_name_leaves_the_code_token_for_token_the_same(name, tricky, plain_exports):
    config, lang = (TRICKY, "pt") if tricky else (TrainConfig(), "en")
    script_tokens, cell_tokens = plain_exports[config, lang]
    record = RunRecord(config, {}, tuple(CIFAR10_CLASSES), run_id=RUN_ID, name=name,
                       results={"test_accuracy": 0.5})
    note = source_note(record)
    script = export_script(config, note, script_name=name)
    assert code_tokens(script) == script_tokens
    cells = code_cells(notebook_json(record, lang))
    assert [code_tokens(c) for c in cells] == cell_tokens


# -- the model card ------------------------------------------------------------------------
def _markup(markdown: str) -> list[str]:
    """What ``markdown`` is made of (headings, tables, links, emphasis, HTML...), its text
    left out."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    return [t.type for tok in md.parse(markdown) for t in [tok, *(tok.children or [])]
            if t.type not in ("text", "softbreak")]


def _assert_shown_as_text(markdown: str, plain: str) -> None:
    """``markdown`` (made with a hostile name) has the markup of ``plain`` (the same made with
    a plain name), and shows the name's characters: none of them is obeyed."""
    from markdown_it import MarkdownIt

    assert _markup(markdown) == _markup(plain)
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert "<img" not in html and "<b>" not in html and "<script" not in html
    assert "onerror=alert(1)" in html and "**bold**" in html


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_the_model_card_shows_names_and_classes_as_text(lang):
    name = "<img src=x onerror=alert(1)> **bold** | [a](http://x)\n# heading `code`"
    classes = (*CIFAR10_CLASSES[:9], "<b>**ship**</b>|x")
    record = RunRecord(TrainConfig(), {}, classes, name=name, results={
        "test_accuracy": 0.5, "per_class_accuracy": {c: 0.5 for c in classes},
        "epochs": [{"epoch": "<b>1</b>", "mean_loss": 1.0}], "steps": 3, "train_seconds": 1.0,
        "device_name": "<script>x</script>"})
    plain = dict(record.results, epochs=[{"epoch": 1, "mean_loss": 1.0}], device_name="x",
                 per_class_accuracy={c: 0.5 for c in (*CIFAR10_CLASSES[:9], "x")})
    _assert_shown_as_text(model_card(record, lang), model_card(RunRecord(
        TrainConfig(), {}, (*CIFAR10_CLASSES[:9], "x"), name="run", results=plain), lang))


# -- the command line's messages --------------------------------------------------------------
def test_cli_export_says_what_is_wrong_in_one_line_whatever_the_names(tmp_path, capsys):
    path = _saved(tmp_path, "run")
    plain = tmp_path / "only\nweights.pth"
    torch.save(TutorialNet().state_dict(), plain)  # the tutorial's own line
    cases = [([str(path), "-o", str(tmp_path / "run\u2028.txt")], ".py, .ipynb, .zip"),
             ([str(path), "-o", str(tmp_path / "no\rsuch" / "run.py")], "could not be written"),
             ([str(path), "-o", str(tmp_path / ("x" * 300 + "\n.py"))], "could not be written"),
             ([str(plain), "-o", str(tmp_path / "x.py")], "only a network's weights"),
             ([str(tmp_path / "no\x85such.pth")], "such.pth")]
    for args, said in cases:
        assert main(["export", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and said in err, err
        assert not any(ch in err[:-1] for ch in BREAKS), err
    # and a name with a line break that can be written says where, on one line
    assert main(["export", str(path), "-o", str(tmp_path / "two\nlines.py")]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "two lines.py" in out
    # a folder as the output: the script under its default name inside it
    folder = tmp_path / "exports"
    folder.mkdir()
    assert main(["export", str(path), "-o", str(folder)]) == 0
    assert str(folder / "cifar_run.py") in capsys.readouterr().out
    compile((folder / "cifar_run.py").read_text(encoding="utf-8"), "cifar_run.py", "exec")


# -- CSV cells ----------------------------------------------------------------------------------
def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised():
    from cifarlab.core.safe_text import csv_cell, csv_value

    for bad in ("=1+2", "+1", "-1+cmd|' /C calc'!A0", "@SUM(A1)", "\t=1", "\r=1", "'=1"):
        cell = csv_cell(bad)
        assert cell.startswith("'") and csv_value(cell) == bad
    for fine in ("Ana", "1.5", "", "a=b", " =1"):
        assert csv_cell(fine) == fine == csv_value(fine)
    assert csv_cell(-1.5) == -1.5 and csv_cell(None) is None   # numbers stay numbers


def test_the_leaderboard_csv_neutralises_a_formula_nickname():
    import csv

    from cifarlab.serve.classroom.model import LeaderRow
    from cifarlab.lab.classroom import leader_csv

    rows = [LeaderRow(1, '=HYPERLINK("http://x","click")', 0.5, 0.5, 12.0, 1.0),
            LeaderRow(2, "@Ana", 0.4, 0.4, None, 2.0)]
    table = list(csv.DictReader(io.StringIO(leader_csv(rows, "public", "best_accuracy"))))
    assert [r["nickname"] for r in table] == ['\'=HYPERLINK("http://x","click")', "'@Ana"]
    assert [r["rank"] for r in table] == ["1", "2"]


def test_the_timing_csv_neutralises_text_cells_and_reads_them_back_exactly():
    import csv

    from cifarlab.lab.gpu.results import COLUMNS, SweepResult

    row = {c: ("" if t is str else False if t is bool else None) for c, t in COLUMNS.items()}
    row.update(device="cpu", device_kind="cpu", device_name="=2+5", pipeline="fast",
               batch_size=4, width=1, images_per_s=100.0, step_ms=40.0, host="-host",
               error="", recorded_at="2025-01-02T03:04:05+00:00", loss=-0.5)
    result = SweepResult(rows=[row], environment={}, config={}, host="-host",
                         recorded_at="2025-01-02T03:04:05+00:00")
    text = result.to_csv()
    (cells,) = list(csv.DictReader(io.StringIO(text.partition("\n")[2])))
    assert cells["device_name"] == "'=2+5" and cells["host"] == "'-host"
    assert cells["loss"] == "-0.5"                       # a number is no formula
    again = SweepResult.from_csv_text(text)
    assert again.rows == result.rows and json.loads(json.dumps(again.rows)) == again.rows


# -- the templates --------------------------------------------------------------------------------
def test_the_templates_let_a_value_in_only_through_the_three_filters():
    import jinja2

    from cifarlab.core.export.render import _ENV, TEMPLATES

    def render(source, **values):
        return _ENV.from_string(source).render(**values)

    assert render("x = {{ v|py }}  # {{ v|comment }}", v="a\u2028b\"\n") == \
        "x = 'a\\u2028b\"\\n'  # a b\""
    assert render("self.{{ v|ident }} = {{ n|py(4) }}", v="conv1", n=[1, 2]) == \
        "self.conv1 = [1, 2]"
    for source, values in [("{{ v }}", {"v": "os.system('x')"}), ("{{ v ~ '' }}", {"v": 1}),
                           ("{{ v|py }}", {"v": float("nan")}), ("{{ v|ident }}", {"v": "a b"}),
                           ("{{ v|ident }}", {"v": "import"}), ("{{ v|py }}", {"v": object()})]:
        with pytest.raises(TypeError):
            render(source, **values)
    with pytest.raises(jinja2.UndefinedError):
        render("{{ missing|py }}")
    with pytest.raises(jinja2.TemplateAssertionError):   # Jinja's own filters are gone
        render("{{ v|safe }}", v="x")
    # |comment only ever writes after a # on its line
    uses = 0
    for path in TEMPLATES.glob("*.j2"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for use in re.finditer(r"\{\{[^}]*\|comment\b[^}]*\}\}", line):
                uses += 1
                assert "#" in line[:use.start()], f"{path.name}:{n}"
    assert uses >= 5


@pytest.mark.integration   # a process of its own
def test_the_exported_script_and_notebook_lint_clean(tmp_path):
    """pyflakes' and pycodestyle's rules (ruff's F, E, W) over a script and a notebook that
    use every trick: no unused import, undefined name or stray whitespace."""
    import shutil
    from pathlib import Path

    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).is_file():
        pytest.skip("ruff is not installed here")
    record = RunRecord(TRICKY, {}, tuple(CIFAR10_CLASSES), env={"torch_threads": 1},
                       results={"test_accuracy": 0.5, "epochs": [{"mean_loss": 1.0}]})
    (tmp_path / "run.py").write_text(export_script(TRICKY, "a note", script_name="run.py"))
    (tmp_path / "plain.py").write_text(export_script(TrainConfig()))
    (tmp_path / "run.ipynb").write_text(notebook_json(record, "es"))
    proc = subprocess.run([ruff, "check", "--no-cache", "--isolated", "--select", "E,F,W",
                           "--line-length", "100", "."], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]


# -- import circles --------------------------------------------------------------------------------
def _import_graph(root) -> dict[str, set[str]]:
    """cifarlab's modules and what each imports (functions' imports too), by ast. ``from a
    import b`` imports ``a`` (its __init__ runs, and b is read from it) and, when ``a.b`` is
    a module, ``a.b`` too."""
    paths = {".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__"): p
             for p in root.rglob("*.py")}

    def module(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {module(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets |= {module(base)} | {f"{base}.{a.name}" for a in node.names
                                             if f"{base}.{a.name}" in paths}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, out = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_export_package_has_no_import_circle():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "cifarlab"
    graph = _import_graph(root)
    assert "cifarlab.core.export" in graph and len(graph) > 50
    ours = [c for c in _circles(graph)
            if any(m.startswith(("cifarlab.core.export", "cifarlab.core.safe_text")) for m in c)]
    assert not ours, ours
    # its submodules import their siblings, never the package whose __init__ imports them
    assert not [m for m, deps in graph.items() if m.startswith("cifarlab.core.export.")
                and "cifarlab.core.export" in deps]
    # the checker sees a circle where there is one
    assert _circles({"p": {"p.a"}, "p.a": {"p"}, "q": set()}) == [{"p", "p.a"}]
