"""Every notebook in notebooks/ runs top to bottom without error."""
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import finished_work
from nbclient import NotebookClient

FOLDER = Path(__file__).parent.parent / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("*.ipynb"))


def _study_of(nb) -> str | None:
    """The study a notebook runs (``studies.run_study("<name>", ...)``), if any."""
    names = {m for c in nb.cells if c.cell_type == "code"
             for m in re.findall(r"run_study\(\s*\"(\w+)\"", c.source)}
    assert len(names) <= 1, names
    return names.pop() if names else None


def test_there_are_notebooks():
    assert NOTEBOOKS


def test_each_study_notebook_writes_where_the_shared_smoke_output_is_placed():
    """The smoke output is placed at ``runs/<study>-smoke``: a notebook that wrote elsewhere would
    silently train its study again (and time out the suite) instead of reusing it."""
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        if (name := _study_of(nb)) is not None:
            source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
            assert f'OUT = Path("runs") / f"{name}-{{PRESET}}"' in source, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, tmp_path, monkeypatch, study_smoke):
    monkeypatch.setenv("VAETRANSFER_PRESET", "smoke")  # studies' and sweeps' notebooks run at smoke size
    nb = nbformat.read(path, as_version=4)
    if (name := _study_of(nb)) is not None:
        # The study's smoke run itself is tested in test_studies.py; its finished output, copied
        # where the notebook writes, is resumed (every run and step reused), so each notebook
        # exercises its own code without training the study a second time.
        out, _ = study_smoke(name)
        shutil.copytree(out, tmp_path / "runs" / f"{name}-smoke")
        finished = finished_work(tmp_path / "runs" / f"{name}-smoke")
    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    if name is not None:  # the notebook reused the copied output: nothing redone, nothing written elsewhere
        assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [f"{name}-smoke"]
        after = finished_work(tmp_path / "runs" / f"{name}-smoke")
        assert {k: after.get(k) for k in finished} == finished  # a notebook's own extra runs (a λ sweep) may add


#: A verdict stated in a notebook's own text ("**reproduced**", "| not reproduced |", "✓", …).
_VERDICT = re.compile(r"(\*\*|\|\s*)(✓|✗|~)?\s*(not reproduced|reproduced|contradicted|undecided|absent)\b", re.I)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_text_states_no_verdict_of_its_own(path):
    """Notebook 01's hand-written summary went stale (it said, at `small`, what the generated page no
    longer said). Verdicts now come only from results.json (``shown.summary()``); a markdown cell that
    states one — in bold or a table cell — fails here."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            found = _VERDICT.search(cell.source)
            assert not found, f"{path.name} cell {i} states a verdict by hand: {found.group(0)!r}"
    if path.name[:2] in ("01", "02", "03", "04", "05"):
        assert any(c.cell_type == "code" and "shown.summary()" in c.source for c in nb.cells), path.name


def test_the_rendered_summary_says_what_the_results_say(study_smoke):
    from vaetransfer.studies import shown_outputs

    out, results = study_smoke("quickstart")
    shown = shown_outputs("quickstart", out, "smoke", show="run")
    text = shown.summary()
    for f in results["findings"]:
        if f.get("kind", "finding") == "finding":
            row = next(line for line in text.splitlines() if line.startswith(f"| `{f['name']}`"))
            assert (f.get("verdict") or "") in row


def test_jupyter_lab_serves_the_notebooks(tmp_path):
    """The README's environment opens the notebooks in JupyterLab: the server starts on a free port,
    lists notebooks/ and opens each notebook through its contents API, then shuts down."""
    import json
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    pytest.importorskip("jupyterlab", reason="JupyterLab is in requirements.txt (the README's environment)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "vaetransfer-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    server = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={FOLDER}"]
                              + (["--allow-root"] if os.geteuid() == 0 else []),
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def get(path):
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()

        deadline = time.monotonic() + 90
        while True:
            try:
                status, body = get("/api/contents")
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, "JupyterLab did not start within 90 s"
                time.sleep(0.5)
        listed = sorted(e["name"] for e in json.loads(body)["content"] if e["type"] == "notebook")
        assert status == 200 and listed == sorted(p.name for p in NOTEBOOKS)
        for name in listed:
            status, body = get(f"/api/contents/{name}")
            assert status == 200 and json.loads(body)["content"]["cells"], name
        status, page = get("/lab")
        assert status == 200 and b"JupyterLab" in page
    finally:
        server.terminate()
        server.wait(timeout=30)
