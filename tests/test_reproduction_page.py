"""The reproduction page (`vaetransfer findings --markdown`, `studies.reproduction_page`) on
synthetic study outputs, the Diagnosis of a finding, and what `Finding.judge` records."""
from __future__ import annotations

import json

import pytest

import vaetransfer
from vaetransfer import cli, studies
from vaetransfer.studies import report

PNG = b"\x89PNG\r\n\x1a\n"


def _record(name, reproduced, evidence, reason=None, figures=None, diagnosis=None, old=False):
    f = {"name": name, "claim": f"claim of {name}", "source": f"Paper (2020), Fig. {len(name)}",
         "rule": f"rule of {name}", "reproduced": reproduced, "evidence": evidence, "reason": reason}
    if not old:
        f.update(figures=figures or [], diagnosis=diagnosis)
    return f


def _output(folder, study, title, preset, findings, seconds, torch=None, device="cpu", files=()):
    folder.mkdir(parents=True)
    results = {"schema": 2, "study": study, "title": title, "preset": preset, "config": {},
               "execution": {"executor": "local", "workers": 1, "device": device}, "runs": {},
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
    ], 1234.5, torch="2.4.0", device="cuda", files=("fig_a.png",))
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
        "| **total** |  | 1 ✓ · 0 ✗ · 0 – | 0 ✓ · 1 ✗ · 1 – | 1 ✓ · 1 ✗ · 1 – | 0 ✓ · 1 ✗ · 0 – |",
        "",
    ]
    assert [line for line in lines if line.startswith("## ")] == [
        "## Summary", "## Transfer learning with VAEs", "## Quickstart", "## My study"]
    assert [line for line in lines if line.startswith("### ")] == [
        "### `enc_first`", "### `collapse`", "### `only_medium`", "### `q1`", "### `m1`"]
    runs = tmp_path / "runs"
    assert f"- `small`: `{(runs / 't-small').as_posix()}` — 12.5 s, torch 2.4.0" in lines
    assert f"- `medium`: `{(runs / 't-medium').as_posix()}` — 1,234.5 s, torch 2.4.0, device cuda" in lines
    assert f"- `smoke`: `{(runs / 'qs-smoke' / 'results.json').as_posix()}` — 3.0 s" in lines
    assert lines.index("Study `transfer`, from:") < lines.index(f"- `small`: `{(runs / 't-small').as_posix()}` — "
                                                                "12.5 s, torch 2.4.0")


def test_finding_blocks_numbers_figures_and_diagnosis(outputs, tmp_path):
    page = studies.reproduction_page(outputs, link_base=tmp_path / "docs")
    assert page.startswith(f"# {report.DEFAULT_TITLE}\n")
    blocks = _blocks(page)
    enc = blocks["enc_first"].splitlines()
    assert enc[1:4] == ["- **Claim:** claim of enc_first", "- **Source:** Paper (2020), Fig. 9",
                        "- **Rule:** rule of enc_first"]
    table = enc[enc.index("| preset | verdict | key numbers |"):]
    assert table[2] == ("| `small` | ✗ not reproduced | `gap=0.0123`; `nested.x=1230`; "
                        "`nested.y=[1, 2, 3, 4, 5, 6, … (2 more)]` |")
    assert table[3] == ("| `medium` | ✓ reproduced | `k00=0`; `k01=0.333`; `k02=0.667`; `k03=1.00`; `k04=1.33`; "
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
    assert "| `small` | – undecided | `ys=[2.00]` |" in collapse and "| `medium` | ✗ not reproduced | — |" in collapse
    assert "**Diagnosis (data):** The stand-in images have no texture. *(preset `small`)*" in collapse
    assert "Undecided at" not in blocks["collapse"]
    only = blocks["only_medium"].splitlines()
    assert [line for line in only if line.startswith("| `")] == ["| `medium` | – undecided | `s=0.500 ± 0.0100` |"]
    assert "**Undecided at `medium`:** too few seeds" in only and "Diagnosis" not in blocks["only_medium"]
    # An old results.json (no figures, no diagnosis) renders; numbers beyond 1e6 in e-notation.
    q1 = blocks["q1"]
    assert "| `smoke` | ✓ reproduced | `n=2.00e+06` |" in q1 and "![" not in q1 and "Diagnosis" not in q1
    assert "| `custom` | ✗ not reproduced | `x=1.50e-07` |" in blocks["m1"]


def test_links_as_given_without_link_base(outputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    page = studies.reproduction_page(["runs/t-small", "runs/t-medium"])
    assert "![fig_a.png (medium)](runs/t-medium/fig_a.png)" in page
    assert "![fig_b.png (small)](runs/t-small/fig_b.png)" in page
    assert "- `small`: `runs/t-small` — 12.5 s, torch 2.4.0" in page


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
    assert report._cell(kn({"a|b": 1})) == "`a\\|b=1`"


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
    assert "7 findings: 2 reproduced, 3 not reproduced, 2 undecided" in table
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
    plain = studies.Finding("f", "claim", "source", "rule", _decide)
    assert plain.judge(None, {"x": 2}) == {"name": "f", "claim": "claim", "source": "source", "rule": "rule",
                                           "reproduced": True, "evidence": {"x": 2}, "reason": None,
                                           "figures": [], "diagnosis": None}

    def diagnose(c, a):
        return None if a["x"] > 1 else studies.Diagnosis("scale", "x grows with steps.", {"x": a["x"]})

    f = studies.Finding("f", "claim", "source", "rule", _decide, figures=["a.png", "sub/b.png"], diagnose=diagnose)
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
        studies.Finding("f", "c", "s", "r", _decide, diagnose=lambda c, a: "because").judge(None, {"x": 1})
    assert info.value.argument == "diagnose"
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        studies.Finding("f", "c", "s", "r", _decide,
                        diagnose=lambda c, a: studies.Diagnosis("open", "?", {"o": object()})).judge(None, {"x": 1})
    assert info.value.argument == "f.diagnosis"
    for kw, error, argument in [({"figures": "a.png"}, vaetransfer.ArgumentTypeError, "figures"),
                                ({"figures": ("../a.png",)}, vaetransfer.ArgumentError, "figures"),
                                ({"figures": ("/abs/a.png",)}, vaetransfer.ArgumentError, "figures"),
                                ({"figures": ("",)}, vaetransfer.ArgumentError, "figures"),
                                ({"diagnose": 3}, vaetransfer.ArgumentTypeError, "diagnose")]:
        with pytest.raises(error) as info:
            studies.Finding("f", "c", "s", "r", _decide, **kw)
        assert info.value.argument == argument
