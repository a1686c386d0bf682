"""docs/RECIPES.md, run as it stands: the GitHub Actions step, the Makefile target, the training
loop and the Celery-style worker (the Node script is run by clients/node/test/recipes.test.js)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO


def recipes() -> dict[str, str]:
    text = (REPO / "docs" / "RECIPES.md").read_text()
    found = re.findall(r"<!-- recipe: (\S+) -->\n```[a-z]*\n(.*?)\n```", text, flags=re.S)
    return {name: body + "\n" for name, body in found}


RECIPES = recipes()


def binary_dir() -> str:
    return str(Path(os.environ["RINGCAST_BIN"]).resolve().parent)


def test_the_document_holds_every_recipe():
    assert sorted(RECIPES) == ["Makefile", "github-actions.yml", "train.py", "upload.mjs", "worker.py"]


def step_script(yaml: str) -> str:
    """The `run: |` block of a GitHub Actions step, as the runner hands it to bash."""
    lines = yaml.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "run: |") + 1
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = [line for line in lines[start:] if not line.strip() or len(line) - len(line.lstrip()) >= indent]
    return textwrap.dedent("\n".join(body)) + "\n"


@pytest.mark.parametrize("outcome", ["passes", "fails"])
def test_the_github_actions_step_wraps_the_job_and_posts_a_live_badge(live, tmp_path, outcome):
    run_number = "41" if outcome == "passes" else "42"
    (tmp_path / "Makefile").write_text("test:\n\t@echo all tests passed\n" if outcome == "passes" else "test:\n\t@echo 1 test failed; exit 2\n")
    summary = tmp_path / "summary.md"
    env = live.env({"GITHUB_RUN_NUMBER": run_number, "GITHUB_STEP_SUMMARY": str(summary), "PATH": binary_dir() + os.pathsep + os.environ["PATH"]})
    result = subprocess.run(["bash", "-e", "-c", step_script(RECIPES["github-actions.yml"])], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    task = live.task(f"ci.test-{run_number}")
    badge_url = f"{live.url}/badge/ci.test-{run_number}.svg?label=tests"
    assert summary.read_text() == f"![tests]({badge_url})\n"
    with urllib.request.urlopen(badge_url, timeout=10) as answer:
        badge = answer.read().decode()
    if outcome == "passes":
        assert result.returncode == 0, result.stderr
        assert "all tests passed" in result.stdout
        assert (task["state"], task["title"], task["kind"]) == ("done", f"Tests #{run_number}", "ci.test")
        assert "tests: done" in badge
    else:
        assert result.returncode == 2
        assert (task["state"], task["detail"]) == ("failed", "exit status 2")
        assert "tests: failed" in badge
        assert "1 test failed" in live.server.api("GET", f"/api/tasks/ci.test-{run_number}/log")["lines"]


def test_the_makefile_target_runs_any_target_live(live, tmp_path):
    (tmp_path / "Makefile").write_text(RECIPES["Makefile"] + "\nbuild:\n\t@echo built\n")
    env = live.env({"PATH": binary_dir() + os.pathsep + os.environ["PATH"]})
    result = subprocess.run(["make", "--no-print-directory", "live-build"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "built" in result.stdout
    task = live.task("make.build")
    assert (task["state"], task["title"]) == ("done", "make build")
    assert live.server.api("GET", "/api/tasks/make.build/log")["lines"] == ["built"]


def test_the_training_loop_shows_epochs_with_batches_as_a_child(live, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(RECIPES["train.py"])
    result = subprocess.run([sys.executable, str(script)], env=live.env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("final loss ")
    epochs = live.task("ml.train-demo")
    batches = live.task("ml.train-demo.batches")
    assert (epochs["state"], epochs["completed"], epochs["total"], epochs["title"]) == ("done", 3, 3, "epochs")
    assert (batches["parent"], batches["state"], batches["completed"], batches["visible"]) == ("ml.train-demo", "done", 40, False)
    assert batches["detail"].endswith("loss=" + result.stdout.split()[-1])


def test_the_worker_reports_one_task_per_job(live, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(RECIPES["worker.py"])
    result = subprocess.run([sys.executable, str(script)], env=live.env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "batch 1: 5 images", "batch 2: 5 images", "failed: image 2 of batch 3 is corrupt", "batch 4: 5 images"]
    for job in (1, 2, 4):
        task = live.task(f"jobs.resize-{job}")
        assert (task["state"], task["completed"], task["title"]) == ("done", 5, f"Resize batch {job}")
    failed = live.task("jobs.resize-3")
    assert (failed["state"], failed["detail"], failed["completed"]) == ("failed", "OSError: image 2 of batch 3 is corrupt", 2)
