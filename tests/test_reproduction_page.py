"""The reproduction page (`vaetransfer findings --markdown`, `studies.reproduction_page`) on
synthetic study outputs, the Diagnosis of a finding, and what `Finding.judge` records."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

import vaetransfer
from vaetransfer import cli, studies
from vaetransfer.studies import pipeline, published, report, reproduction
from vaetransfer.studies.kit import declarations

PNG = b"\x89PNG\r\n\x1a\n"


def _record(name, reproduced, evidence, reason=None, figures=None, diagnosis=None, old=False):
    f = {"name": name, "claim": f"claim of {name}", "source": f"Paper (2020), Fig. {len(name)}",
         "rule": f"rule of {name}", "reproduced": reproduced, "evidence": evidence, "reason": reason}
    if not old:
        f.update(figures=figures or [], diagnosis=diagnosis)
    return f


def _output(folder, study, title, preset, findings, seconds, torch=None, device="cpu", files=(), runs=None):
    folder.mkdir(parents=True)
    results = {"schema": 2, "study": study, "title": title, "preset": preset, "config": {},
               "execution": {"executor": "local", "workers": 1, "device": device}, "runs": runs or {},
               "analysis": {}, "findings": findings, "figures": list(files), "seconds": seconds}
    if torch:
        results["build_info"] = {"torch": torch}
    (folder / "results.json").write_text(json.dumps(results))
    for f in files:
        (folder / f).write_bytes(PNG)
    return folder


@pytest.fixture
def outputs(tmp_path):
    """transfer at small and medium, quickstart at smoke (an old results.json, given as the file),
    a study of one's own at a preset of its own."""
    runs = tmp_path / "runs"
    small = _output(runs / "t-small", "transfer", "Transfer learning with VAEs", "small", [
        _record("enc_first", False, {"gap": 0.012345, "nested": {"x": 1234.5, "y": [1, 2, 3, 4, 5, 6, 7, 8]}},
                figures=["fig_a.png", "fig_b.png", "missing.png"],
                diagnosis={"kind": "scale", "text": "Too few steps at small.", "evidence": {"steps": 300}}),
        _record("collapse", None, {"ys": [2.0]}, reason="one seed cannot decide",
                diagnosis={"kind": "data", "text": "The stand-in images have no texture.", "evidence": {}}),
    ], 12.5, torch="2.4.0", files=("fig_a.png", "fig_b.png"))
    medium = _output(runs / "t-medium", "transfer", "Transfer learning with VAEs", "medium", [
        _record("enc_first", True, {f"k{i:02d}": i / 3 for i in range(15)},
                figures=["fig_a.png", "fig_b.png"], diagnosis={"kind": "reproduced", "text": "Shows at medium.", "evidence": {"steps": 3000}}),
        _record("collapse", False, {}),
        _record("only_medium", None, {"s": {"mean": 0.5, "se": 0.01}}, reason="too few seeds"),
    ], 1234.5, torch="2.4.0", device="cuda", files=("fig_a.png",),
        runs={"train": {"done": 60, "runs": 60, "seconds": 14161.8}, "retrain": {"done": 3, "runs": 3, "seconds": 38.2}})
    quick = _output(runs / "qs-smoke", "quickstart", "Quickstart", "smoke",
                    [_record("q1", True, {"n": 2_000_000}, old=True)], 3.0)
    mine = _output(runs / "mine", "my_study", "My study", "custom", [_record("m1", False, {"x": 1.5e-7})], 0.5)
    # Given out of order: the page orders the studies by paper and the presets by size.
    return [quick / "results.json", medium, mine, small]


def _blocks(page: str) -> dict[str, str]:
    """The page's finding blocks by finding name (each up to the next heading)."""
    blocks = {}
    for part in page.split("\n### ")[1:]:
        head, _, body = part.partition("\n")
        blocks[head.strip("`")] = body.split("\n## ")[0]
    return blocks


def test_page_structure_summary_and_order(outputs, tmp_path):
    page = studies.reproduction_page(outputs, title="Reproduction", link_base=tmp_path / "docs")
    lines = page.splitlines()
    assert lines[0] == "# Reproduction" and page.endswith("\n") and not page.endswith("\n\n")
    summary = lines[lines.index("## Summary") + 2:]
    assert summary[:9] == [
        "| study | finding | `smoke` | `small` | `medium` | `custom` |",
        "| --- | --- | --- | --- | --- | --- |",
        "| `transfer` | `enc_first` |  | ✗ | ✓ |  |",
        "| `transfer` | `collapse` |  | – | ✗ |  |",
        "| `transfer` | `only_medium` |  |  | – |  |",
        "| `quickstart` | `q1` | ✓ |  |  |  |",
        "| `my_study` | `m1` |  |  |  | ✗ |",
        # old records (a rule's own False): counted apart from the one procedure's verdicts
        "| **total** |  | 1 ✓ · 0 ✗ · 0 ∅ · 0 – | 0 ✓ · 0 ✗ · 0 ∅ · 1 – · 1 ✗ (own rule) | "
        "1 ✓ · 0 ✗ · 0 ∅ · 1 – · 1 ✗ (own rule) | 0 ✓ · 0 ✗ · 0 ∅ · 0 – · 1 ✗ (own rule) |",
        "",
    ]
    assert [line for line in lines if line.startswith("## ")] == [
        "## Summary", "## Transfer learning with VAEs", "## Quickstart", "## My study"]
    assert [line for line in lines if line.startswith("### ")] == [
        "### `enc_first`", "### `collapse`", "### `only_medium`", "### `q1`", "### `m1`"]
    runs = tmp_path / "runs"
    assert f"- `small`: `{(runs / 't-small').as_posix()}` — last invocation 12.5 s, torch 2.4.0" in lines
    # the runs' time summed over runs (whichever invocations trained them), not the last invocation's
    assert (f"- `medium`: `{(runs / 't-medium').as_posix()}` — 63 runs, 3 h 57 min of run time summed over runs; "
            "last invocation 1,234.5 s, torch 2.4.0, device cuda") in lines
    assert f"- `smoke`: `{(runs / 'qs-smoke' / 'results.json').as_posix()}` — last invocation 3.0 s" in lines
    assert lines.index("Study `transfer`, from:") < lines.index(f"- `small`: `{(runs / 't-small').as_posix()}` — "
                                                                "last invocation 12.5 s, torch 2.4.0")


def test_finding_blocks_numbers_figures_and_diagnosis(outputs, tmp_path):
    page = studies.reproduction_page(outputs, link_base=tmp_path / "docs")
    assert page.startswith(f"# {reproduction.DEFAULT_TITLE}\n")
    blocks = _blocks(page)
    enc = blocks["enc_first"].splitlines()
    assert enc[1:4] == ["- **Claim:** claim of enc_first", "- **Source:** Paper (2020), Fig. 9",
                        "- **Rule:** rule of enc_first"]
    table = enc[enc.index("| preset | verdict | effect [95 % interval] (units) | power | key numbers |"):]
    assert table[2] == ("| `small` | ✗ not reproduced | — | — | `gap=0.0123`; `nested.x=1230`; "
                        "`nested.y=[1, 2, 3, 4, 5, 6, … (2 more)]` |")
    assert table[3] == ("| `medium` | ✓ reproduced | — | — | `k00=0`; `k01=0.333`; `k02=0.667`; `k03=1.00`; `k04=1.33`; "
                        "`k05=1.67`; `k06=2.00`; `k07=2.33`; `k08=2.67`; `k09=3.00`; `k10=3.33`; `k11=3.67`; "
                        "… (3 more) |")
    # Each figure from the largest preset whose output holds it, linked relative to link_base.
    assert "![fig_a.png (medium)](../runs/t-medium/fig_a.png)" in enc
    assert "![fig_b.png (small)](../runs/t-small/fig_b.png)" in enc
    missing = (tmp_path / "runs" / "t-small" / "missing.png").as_posix()
    assert f"*Missing figure:* `missing.png` (not found: `{missing}`)." in enc
    assert "](../runs/t-small/missing.png)" not in page
    # The diagnosis of the largest preset that has one.
    assert "**Diagnosis (reproduced):** Shows at medium. *(preset `medium`; `steps=3000`)*" in enc
    assert "Too few steps" not in blocks["enc_first"]
    collapse = blocks["collapse"].splitlines()
    assert "| `small` | – undecided | — | — | `ys=[2.00]` |" in collapse
    assert "| `medium` | ✗ not reproduced | — | — | — |" in collapse
    assert "**Diagnosis (data):** The stand-in images have no texture. *(preset `small`)*" in collapse
    assert "**Undecided at `small`:** one seed cannot decide" in collapse   # the reason beside the diagnosis
    only = blocks["only_medium"].splitlines()
    assert [line for line in only if line.startswith("| `")] == ["| `medium` | – undecided | — | — | `s=0.500 ± 0.0100` |"]
    assert "**Undecided at `medium`:** too few seeds" in only and "Diagnosis" not in blocks["only_medium"]
    # An old results.json (no figures, no diagnosis) renders; numbers beyond 1e6 in e-notation.
    q1 = blocks["q1"]
    assert "| `smoke` | ✓ reproduced | — | — | `n=2.00e+06` |" in q1 and "![" not in q1 and "Diagnosis" not in q1
    assert "| `custom` | ✗ not reproduced | — | — | `x=1.50e-07` |" in blocks["m1"]


def test_links_as_given_without_link_base(outputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    page = studies.reproduction_page(["runs/t-small", "runs/t-medium"])
    assert "![fig_a.png (medium)](runs/t-medium/fig_a.png)" in page
    assert "![fig_b.png (small)](runs/t-small/fig_b.png)" in page
    assert "- `small`: `runs/t-small` — last invocation 12.5 s, torch 2.4.0" in page


def test_key_numbers():
    kn = studies.key_numbers
    assert kn({}) == "—"
    assert kn({"a": 0.99996, "b": -1234567.0, "c": 5, "d": True, "e": None, "f": "text", "g": float("nan")}) == \
        "`a=1.00`; `b=-1.23e+06`; `c=5`; `d=true`; `e=—`; `f=text`; `g=nan`"
    assert kn({"xs": [0.5, None, 3], "deep": {"er": {"x": 1e-4}}, "empty": {}, "rows": [{"a": 1}]}) == \
        "`xs=[0.500, —, 3]`; `deep.er.x=0.000100`; `empty={}`; `rows=[{\"a\":1}]`"
    assert kn({"xs": list(range(6))}) == "`xs=[0, 1, 2, 3, 4, 5]`"
    assert kn({f"k{i}": i for i in range(13)}, limit=12).endswith("`k11=11`; … (1 more)")
    assert kn({"a|b": "x`y"}) == "`a|b=x'y`"  # a table cell escapes the pipe (below)
    assert reproduction._cell(kn({"a|b": 1})) == "`a\\|b=1`"


def test_cli_writes_the_page(outputs, tmp_path, capsys):
    out = tmp_path / "docs" / "reproduction.md"
    args = [str(d) for d in outputs]
    assert cli.main(["findings", *args, "--markdown", "--out", str(out)]) == 0
    # Links relative to the page's own directory by default; written atomically (no temporaries).
    assert out.read_text() == studies.reproduction_page(outputs, link_base=tmp_path / "docs")
    assert sorted(p.name for p in out.parent.iterdir()) == ["reproduction.md"]
    assert capsys.readouterr().out == ""
    assert cli.main(["findings", *args, "--markdown", "--link-base", str(tmp_path), "--title", "T"]) == 0
    text = capsys.readouterr().out
    assert text == studies.reproduction_page(outputs, title="T", link_base=tmp_path)
    assert "![fig_a.png (medium)](runs/t-medium/fig_a.png)" in text
    # The text table and --json still work, old and new records alike.
    assert cli.main(["findings", *args]) == 0
    table = capsys.readouterr().out
    assert "7 findings: 2 reproduced, 2 undecided, 3 not reproduced" in table
    assert cli.main(["findings", "--json", *args]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in rows] == ["q1", "enc_first", "collapse", "only_medium", "m1", "enc_first", "collapse"]
    assert rows[0]["figures"] == [] and rows[0]["diagnosis"] is None  # the old record, completed
    assert rows[1]["diagnosis"]["kind"] == "reproduced"
    with pytest.raises(SystemExit) as info:
        cli.main(["findings", *args, "--out", str(out)])  # --out goes with --markdown
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        cli.main(["findings", *args, "--markdown", "--json"])


def test_a_page_of_some_studies_lists_the_findings_of_the_others_as_not_run(outputs, tmp_path, capsys):
    """--all-studies: every registered study without an output gets blank summary rows, one per
    declared finding, and its claims under "Not run yet"; the studies with outputs are as before."""
    page = studies.reproduction_page(outputs, expected=["rate_distortion", "transfer", "rate_distortion"])
    plain = studies.reproduction_page(outputs)
    rd = studies.get_study("rate_distortion")
    assert page.startswith(plain.split("| **total**")[0])  # the studies that ran: unchanged rows, same order
    for f in rd.findings:
        assert f"| `rate_distortion` | `{f.name}` |  |  |  |  |" in page
        assert f"- `{f.name}` — {f.claim} *({f.source})*" in page.split("## Not run yet")[1]
    assert page.count(f"### {rd.title} (`rate_distortion`)") == 1 and "(`transfer`)" not in page.split("## Not run yet")[1]
    assert "## Not run yet" not in plain
    with pytest.raises(vaetransfer.ArgumentError) as info:
        studies.reproduction_page(outputs, expected=["no_such_study"])
    assert info.value.argument == "expected"
    out = tmp_path / "page.md"
    assert cli.main(["findings", *map(str, outputs), "--markdown", "--all-studies", "--out", str(out)]) == 0
    assert out.read_text() == studies.reproduction_page(outputs, link_base=tmp_path, expected=studies.available())
    with pytest.raises(SystemExit) as exit_:
        cli.main(["findings", *map(str, outputs), "--all-studies"])  # goes with --markdown
    assert exit_.value.code == 2


@pytest.mark.parametrize("problem", ["missing", "corrupt", "not_results", "bad_record", "bad_figure", "twice"])
def test_cli_names_the_unreadable_output(problem, outputs, tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    if problem == "missing":
        bad = tmp_path / "nowhere"
    elif problem == "corrupt":
        (bad / "results.json").write_text('{"findings": [')
    elif problem == "not_results":
        (bad / "results.json").write_text('{"study": "x"}')
    elif problem in ("bad_record", "bad_figure"):
        record = "oops" if problem == "bad_record" else _record("f", True, {}, figures=["../../etc/x.png"])
        (bad / "results.json").write_text(json.dumps({"study": "x", "preset": "small", "findings": [record]}))
    else:
        bad = outputs[3]  # t-small again, under another name
        (tmp_path / "again").symlink_to(bad)
        bad = tmp_path / "again"
    out = tmp_path / "page.md"
    assert cli.main(["findings", "--markdown", *map(str, outputs), str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "argument 'dirs'" in err[0] and str(bad) in err[0], err
    assert not out.exists()


def test_diagnosis_is_checked():
    d = studies.Diagnosis("setting", "Depends on the learning rate (1e-3 here).", {"lr": 1e-3})
    assert d.to_dict() == {"kind": "setting", "text": "Depends on the learning rate (1e-3 here).",
                           "evidence": {"lr": 1e-3}}
    assert studies.Diagnosis("open", "Not yet separated.").evidence == {}
    assert set(studies.DIAGNOSIS_KINDS) == {"reproduced", "scale", "setting", "data", "defect", "open"}
    for args, error, argument in [(("bogus", "x"), vaetransfer.ArgumentError, "kind"),
                                  ((3, "x"), vaetransfer.ArgumentTypeError, "kind"),
                                  (("scale", "  "), vaetransfer.ArgumentError, "text"),
                                  (("scale", None), vaetransfer.ArgumentTypeError, "text"),
                                  (("scale", "x", [1]), vaetransfer.ArgumentTypeError, "evidence")]:
        with pytest.raises(error) as info:
            studies.Diagnosis(*args)
        assert info.value.argument == argument and f"argument '{argument}'" in str(info.value)


def _decide(c, a):
    return studies.Verdict(a["x"] > 1, {"x": a["x"]})


def test_judge_records_figures_and_diagnosis():
    plain = studies.Finding("f", "claim", "source", "rule", _decide, kind="sanity")
    assert plain.judge(None, {"x": 2}) == {"name": "f", "kind": "sanity", "claim": "claim",
                                           "source": "source", "rule": "rule", "verdict": "passed",
                                           "reproduced": True, "effect": None, "evidence": {"x": 2}, "reason": None,
                                           "figures": [], "diagnosis": None}

    def diagnose(c, a, v):
        assert v["verdict"] in ("passed", "failed")   # the diagnosis sees what was decided
        return None if a["x"] > 1 else studies.Diagnosis("scale", "x grows with steps.", {"x": a["x"]})

    f = studies.Finding("f", "claim", "source", "rule", _decide, figures=["a.png", "sub/b.png"], diagnose=diagnose,
                        kind="sanity")
    assert f.figures == ("a.png", "sub/b.png")
    record = f.judge(None, {"x": 0.5})
    assert record["figures"] == ["a.png", "sub/b.png"] and record["reproduced"] is False
    assert record["diagnosis"] == {"kind": "scale", "text": "x grows with steps.", "evidence": {"x": 0.5}}
    assert json.loads(json.dumps(record)) == record
    assert f.judge(None, {"x": 2})["diagnosis"] is None
    # The record renders on index.md too.
    index = report.render_index({"title": "T", "study": "s", "seconds": 1.0, "execution": {"executor": "local",
                                 "workers": 1}, "runs": {}, "config": {}, "findings": [record]})
    assert "Diagnosis (scale): x grows with steps." in index

    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        studies.Finding("f", "c", "s", "r", _decide, diagnose=lambda c, a, v: "because", kind="sanity").judge(None, {"x": 1})
    assert info.value.argument == "diagnose"
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        studies.Finding("f", "c", "s", "r", _decide, kind="sanity",
                        diagnose=lambda c, a, v: studies.Diagnosis("open", "?", {"o": object()})).judge(None, {"x": 1})
    assert info.value.argument == "f.diagnosis"
    for kw, error, argument in [({"figures": "a.png"}, vaetransfer.ArgumentTypeError, "figures"),
                                ({"figures": ("../a.png",)}, vaetransfer.ArgumentError, "figures"),
                                ({"figures": ("/abs/a.png",)}, vaetransfer.ArgumentError, "figures"),
                                ({"figures": ("",)}, vaetransfer.ArgumentError, "figures"),
                                ({"diagnose": 3}, vaetransfer.ArgumentTypeError, "diagnose")]:
        with pytest.raises(error) as info:
            studies.Finding("f", "c", "s", "r", _decide, **kw)
        assert info.value.argument == argument


# ---------------------------------------------------------------------------------- what a notebook shows
def _committed(root):
    """Committed transfer outputs at small and medium, rate_distortion at small only."""
    _output(root / "transfer-small", "transfer", "T", "small", [_record("a", False, {})], 10.0, files=("f.png",))
    _output(root / "transfer-medium", "transfer", "T", "medium", [_record("a", True, {})], 60.0, files=("f.png",),
            runs={"train": {"done": 4, "runs": 4, "seconds": 7200.0}})
    _output(root / "rate_distortion-small", "rate_distortion", "R", "small", [_record("b", None, {}, reason="r")], 5.0)
    return root


def test_a_notebook_shows_the_largest_committed_preset_above_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv(published.SHOW_ENV, raising=False)
    root = _committed(tmp_path / "reproduction")
    own = _output(tmp_path / "runs" / "transfer-small", "transfer", "T", "small", [_record("a", False, {})], 9.0)
    shown = studies.shown_outputs("transfer", own, "small", committed=root)
    assert (shown.dir, shown.preset, shown.committed) == (root / "transfer-medium", "medium", True)
    assert shown.findings[0]["reproduced"] is True and shown.analysis == {} and shown.figures == ["f.png"]
    assert (shown / "f.png").is_file()
    assert "committed **`medium`** outputs" in shown.note() and "2.0" not in shown.note()[:20]
    assert "4 runs, 2 h 0 min of run time summed over runs; last invocation 60.0 s" in shown.note()
    # From smoke, medium still comes first; small is taken where there is no medium.
    assert studies.shown_outputs("transfer", own, "smoke", committed=root).preset == "medium"
    rd_own = _output(tmp_path / "runs" / "rd", "rate_distortion", "R", "smoke", [_record("b", False, {})], 1.0)
    rd = studies.shown_outputs("rate_distortion", rd_own, "smoke", committed=root)
    assert (rd.preset, rd.committed, rd.dir.name) == ("small", True, "rate_distortion-small")
    # Nothing committed above the notebook's preset: its own run, and the note says so.
    for preset in ("medium",):
        mine = studies.shown_outputs("transfer", own, preset, committed=root)
        assert (mine.dir, mine.committed, mine.preset) == (own, False, preset)
        assert "this notebook's own" in mine.note()
    assert studies.shown_outputs("rate_distortion", rd_own, "small", committed=root).dir == rd_own
    assert studies.shown_outputs("quickstart", own, "small", committed=root).dir == own     # no committed output
    assert studies.shown_outputs("transfer", own, "small", committed=tmp_path / "nowhere").dir == own


def test_show_run_and_the_environment_choose_the_notebooks_own_run(tmp_path, monkeypatch):
    root = _committed(tmp_path / "reproduction")
    own = _output(tmp_path / "own", "transfer", "T", "small", [_record("a", False, {})], 9.0)
    assert studies.shown_outputs("transfer", own, "small", committed=root, show="run").dir == own
    monkeypatch.setenv(published.SHOW_ENV, "run")
    assert studies.shown_outputs("transfer", own, "small", committed=root).dir == own
    monkeypatch.setenv(published.SHOW_ENV, "auto")
    monkeypatch.setenv(published.COMMITTED_ENV, str(root))   # found without being given
    assert studies.shown_outputs("transfer", own, "small").dir == root / "transfer-medium"


def test_committed_outputs_are_found_above_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(published.COMMITTED_ENV, raising=False)
    (tmp_path / "repo" / published.COMMITTED_DIR).mkdir(parents=True)
    (tmp_path / "repo" / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "repo" / "notebooks")
    assert published.committed_root() == tmp_path / "repo" / published.COMMITTED_DIR


def test_shown_outputs_names_bad_arguments_and_mislabelled_outputs(tmp_path):
    root = _committed(tmp_path / "reproduction")
    own = _output(tmp_path / "own", "transfer", "T", "small", [_record("a", False, {})], 9.0)
    with pytest.raises(vaetransfer.ArgumentError, match="show"):
        studies.shown_outputs("transfer", own, "small", committed=root, show="newest")
    with pytest.raises(vaetransfer.ArgumentError, match="preset"):
        studies.shown_outputs("transfer", own, "large", committed=root)
    # A committed folder whose results are another study's, or torn, is named — never shown.
    _output(root / "quickstart-medium", "transfer", "T", "medium", [_record("a", True, {})], 1.0)
    with pytest.raises(vaetransfer.ArgumentError, match="quickstart-medium"):
        studies.shown_outputs("quickstart", own, "small", committed=root)
    (root / "transfer-medium" / "results.json").write_text('{"study": "transfer", "findings": [')
    with pytest.raises(vaetransfer.ArgumentError, match="transfer-medium"):
        studies.shown_outputs("transfer", own, "small", committed=root)
    with pytest.raises(vaetransfer.ArgumentError, match="run_dir"):   # no own run to fall back on
        studies.shown_outputs("transfer", tmp_path / "missing", "medium", committed=root)


# ---------------------------------------------------------------------------------- committing outputs
def test_publish_copies_results_index_and_listed_figures_only(tmp_path):
    out = _output(tmp_path / "run", "transfer", "T", "medium",
                  [_record("a", True, {}, figures=["fig_a.png", "sub/fig_c.png"])], 99.0, files=("fig_a.png", "fig_b.png"))
    (out / "sub").mkdir()
    (out / "sub" / "fig_c.png").write_bytes(PNG)
    (out / "index.md").write_text("# T\n")
    for junk in ("sweeps/models/run-1/snapshot.pt", "steps/x.json", "unlisted.png"):
        (out / junk).parent.mkdir(parents=True, exist_ok=True)
        (out / junk).write_bytes(b"x")
    root = tmp_path / "docs" / "reproduction"
    target = published.publish(out, root)
    assert target == root / "transfer-medium"
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()) == [
        "fig_a.png", "fig_b.png", "index.md", "results.json", "sub/fig_c.png"]
    assert json.loads((target / "results.json").read_text())["seconds"] == 99.0
    # Publishing again replaces the folder whole: a figure dropped from the results goes too.
    results = json.loads((out / "results.json").read_text())
    results["figures"] = ["fig_a.png"]
    results["findings"][0]["figures"] = []
    (out / "results.json").write_text(json.dumps(results))
    published.publish(out / "results.json", root)
    assert sorted(p.name for p in target.iterdir()) == ["fig_a.png", "index.md", "results.json"]
    assert [p.name for p in root.iterdir()] == ["transfer-medium"]     # no staging folder left behind


def test_a_finding_lists_only_the_figures_its_study_drew(tmp_path):
    """A preset that skips a figure (t5_vae at small: no β-peak sweep, no beta_peaks.png) must not
    list it under a finding: the output would then refuse to publish. The pipeline passes the
    figures the study drew to each finding's record."""
    @dataclasses.dataclass
    class C:
        seed: int = 0

    def figures(c, a, ctx):
        (ctx.out / "drawn.png").write_bytes(PNG)
        return ["drawn.png"]

    f = studies.Finding("f", "claim", "source", "rule", _decide, figures=("drawn.png", "sweep_only.png"),
                        kind="sanity")
    study = studies.Study(name="partial", title="P", config=C, presets={p: C() for p in declarations.REQUIRED_PRESETS},
                          stages=(), analyse=lambda c, runs, ctx: {"x": 2}, figures=figures, findings=(f,))
    results = pipeline.run(study, C(), tmp_path / "out", preset="small", progress=False)
    assert results["figures"] == ["drawn.png"] and results["findings"][0]["figures"] == ["drawn.png"]
    target = published.publish(tmp_path / "out", tmp_path / "docs")
    assert sorted(p.name for p in target.iterdir()) == ["drawn.png", "index.md", "results.json"]
    assert f.judge(None, {"x": 2})["figures"] == ["drawn.png", "sweep_only.png"]  # without `made`: as declared


def test_publish_refuses_an_output_missing_a_listed_figure_and_keeps_the_old_copy(tmp_path):
    root = tmp_path / "reproduction"
    good = _output(tmp_path / "good", "transfer", "T", "small", [_record("a", True, {})], 1.0, files=("f.png",))
    published.publish(good, root)
    bad = _output(tmp_path / "bad", "transfer", "T", "small", [_record("a", False, {}, figures=["gone.png"])], 2.0)
    with pytest.raises(vaetransfer.ArgumentError, match="gone.png"):
        published.publish(bad, root)
    assert json.loads((root / "transfer-small" / "results.json").read_text())["seconds"] == 1.0
    nameless = _output(tmp_path / "nameless", "", "T", "small", [_record("a", True, {})], 1.0)
    with pytest.raises(vaetransfer.ArgumentError, match="no study and preset"):
        published.publish(nameless, root)
    escape = _output(tmp_path / "escape", "transfer", "T", "small", [_record("a", True, {}, figures=["../x.png"])], 1.0)
    with pytest.raises(vaetransfer.ArgumentError, match="outside the folder"):
        published.publish(escape, root)


def test_cli_publishes_then_writes_the_page_from_the_copies(outputs, tmp_path, capsys):
    root, page = tmp_path / "docs" / "reproduction", tmp_path / "docs" / "reproduction.md"
    small, medium = outputs[3], outputs[1]
    (small / "missing.png").write_bytes(PNG)   # listed by a finding of the small output
    assert cli.main(["findings", str(medium), "--publish", str(root)]) == 2   # lacks fig_b.png: named, nothing copied
    assert "fig_b.png" in capsys.readouterr().err and not root.exists()
    (medium / "fig_b.png").write_bytes(PNG)
    assert cli.main(["findings", str(small), str(medium), "--publish", str(root), "--markdown", "--out", str(page)]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["transfer-medium", "transfer-small"]
    text = page.read_text()
    assert "](reproduction/transfer-medium/fig_b.png)" in text and "](reproduction/transfer-small/missing.png)" in text
    assert str(tmp_path / "runs") not in text


def test_effects_power_and_sanity_checks_apart_on_the_page(tmp_path):
    """Records of the one procedure: the effect with its interval and units, the power, the reason of
    a decision against, and sanity checks in a table of their own, left out of the findings' counts."""
    from vaetransfer.studies.kit.decision import Effect, Part
    effect = Effect("a minus b", "seed pair", {"x": Part.of_pairs({(0, 1): 0.40, (0, 2): 0.42, (1, 2): 0.41})},
                    size=0.05, size_source="smallest of interest", control="a step-0 model")
    against = Effect("a minus b", "seed", {"y": Part.of_seeds({0: -0.5, 1: -0.52, 2: -0.49})}, size=0.05,
                     size_source="smallest of interest")
    findings = [studies.Finding("good", "c", "s", "r", lambda c, a: effect).judge(None, {}),
                studies.Finding("bad", "c", "s", "r", lambda c, a: against).judge(None, {}),
                studies.Finding("works", "c", "s", "r", lambda c, a: studies.Verdict(True), kind="sanity").judge(None, {})]
    out = _output(tmp_path / "o", "transfer", "T", "medium", findings, 1.0)
    page = studies.reproduction_page([out])
    summary = page.split("## Summary")[1].split("\n## ")[0]
    assert "| `transfer` | `good` | ✓ |" in summary and "| `transfer` | `bad` | ✗ |" in summary
    assert "| **total** |  | 1 ✓ · 1 ✗ · 0 ∅ · 0 – |" in summary and "`works`" not in summary.split("Sanity")[0]
    assert "Sanity checks (not findings" in summary and "| `transfer` | `works` | ✓ |" in summary
    blocks = _blocks(page)
    good = blocks["good"]
    assert "- **Effect:** a minus b — per seed pair; stated size 0.0500 (smallest of interest); margin 0" in good
    assert "- **Control:** a step-0 model" in good
    row = next(line for line in good.splitlines() if line.startswith("| `medium`"))
    assert row.startswith("| `medium` | ✓ reproduced | 0.41 [") and "(3 seeds, 3 pairs)" in row
    assert "**Contradicted at `medium`:** contradicted at y" in blocks["bad"]
    assert "### `works` (sanity check)" in page


@pytest.mark.parametrize("study, preset", [("transfer", "x/../../victim"), ("/tmp/abs", "small"),
                                           ("transfer", ".."), ("../victim", "small"), ("transfer", "a\nb")])
def test_publish_takes_only_plain_names_and_never_leaves_its_root(tmp_path, study, preset):
    """A hostile results.json names the study or preset with a path: refused before anything is written,
    and a directory outside the root (the would-be victim) is untouched."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    out = _output(tmp_path / "run", study, "T", preset, [_record("a", True, {})], 1.0)
    root = tmp_path / "docs" / "reproduction"
    with pytest.raises(vaetransfer.ArgumentError, match="plain name") as e:
        published.publish(out, root)
    assert e.value.argument == "path"
    assert (victim / "precious.txt").read_text() == "keep me"
    assert not root.exists() or not any(root.iterdir())


def test_publish_never_replaces_a_folder_it_did_not_write(tmp_path):
    root = tmp_path / "reproduction"
    mine = root / "transfer-small"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("a user's folder under the root")
    out = _output(tmp_path / "run", "transfer", "T", "small", [_record("a", True, {})], 1.0)
    with pytest.raises(vaetransfer.ArgumentError, match="not a published study output"):
        published.publish(out, root)
    assert (mine / "notes.txt").read_text() == "a user's folder under the root"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x").write_text("x")
    (mine / "notes.txt").unlink()
    mine.rmdir()
    mine.symlink_to(elsewhere, target_is_directory=True)   # a link planted at the name
    with pytest.raises(vaetransfer.ArgumentError):
        published.publish(out, root)
    assert (elsewhere / "x").read_text() == "x"


INJECTIONS = ("<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[click](javascript:alert(1))",
              "<javascript:alert(1)>", "ok\n# Forged heading\n<b>x</b>", "\x1b[31mred\x1b[0m\x07")


def _hostile_output(folder, text):
    f = _record("a" + text, False, {"k" + text: text, "n": 1.0}, reason=text,
                diagnosis={"kind": "open", "text": text, "evidence": {"e": text}})
    f.update(claim=text, source=text, rule=text)
    return _output(folder, "transfer", text, "small", [f], 1.0)


@pytest.mark.parametrize("text", INJECTIONS)
def test_text_from_results_lands_in_the_page_as_text(tmp_path, text):
    page = reproduction.reproduction_page([_hostile_output(tmp_path / "o", text)])
    for bad in ("<script", "<img", "<b>", "<javascript:", "\x1b", "\x07"):
        assert bad not in page, bad
    assert not re.search(r"(?<!\\)\]\(javascript:", page)   # brackets escaped: no link
    assert "\n# Forged heading" not in page
    assert all(not line.startswith("# Forged") for line in page.splitlines())


@pytest.mark.parametrize("text", INJECTIONS)
def test_text_from_results_reaches_the_terminal_without_control_characters(tmp_path, text):
    table = studies.findings_table([_hostile_output(tmp_path / "o", text)])
    assert "\x1b" not in table and "\x07" not in table
    assert len(table.splitlines()) == 4   # header, rule, one finding, the count: no line forged


def test_results_that_are_not_plain_bounded_json_are_named_within_a_second(tmp_path):
    """A FIFO (a read would block for ever), a link to /dev/zero (a read never ends), a 5,000-digit
    integer, nesting 3,000 deep: each an ArgumentError naming the path, at once."""
    import os
    import time

    cases = []
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "results.json")
    cases.append(fifo)
    zero = tmp_path / "zero"
    zero.mkdir()
    (zero / "results.json").symlink_to("/dev/zero")
    cases.append(zero)
    for name, text in (("digits", '{"findings": [], "seconds": ' + "9" * 5000 + "}"),
                       ("deep", '{"findings": [], "x": ' + "[" * 3000 + "]" * 3000 + "}")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(text)
        cases.append(tmp_path / name)
    for folder in cases:
        start = time.perf_counter()
        with pytest.raises(vaetransfer.ArgumentError) as e:
            studies.findings_table([folder])
        assert time.perf_counter() - start < 1.0 and e.value.argument == "dirs", folder
        assert "results.json" in str(e.value)


def test_index_pages_and_help_carry_no_sphinx_markup(study_smoke):
    """index.md showed a study's docstring raw (``:func:`…` ``, double backticks) and so did ``--help``."""
    import re
    import subprocess
    import sys

    from vaetransfer import studies
    from vaetransfer.studies.kit.markdown import rst_to_markdown
    from vaetransfer.studies.report import render_index

    role = re.compile(r":(func|class|mod|meth|data|attr|obj|exc):`|``")
    for name in studies.available():
        description = studies.get_study(name).description
        assert role.search(description), name  # the docstrings do use roles …
        assert not role.search(rst_to_markdown(description)), name  # … their Markdown does not
    assert rst_to_markdown(":func:`~vaetransfer.train.preflight` and ``x``") == "`preflight` and `x`"
    out, results = study_smoke("quickstart")
    page = render_index(results, studies.get_study("quickstart"))
    assert rst_to_markdown(studies.get_study("quickstart").description.strip()) in page
    assert not role.search(page), role.search(page).group(0)
    assert not role.search((out / "index.md").read_text())
    help_text = subprocess.run([sys.executable, "-m", "vaetransfer", "--help"], capture_output=True, text=True,
                               timeout=60)
    assert help_text.returncode == 0 and not role.search(help_text.stdout), help_text.stdout
