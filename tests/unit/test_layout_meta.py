"""Issue 22: the layout shows its layers. A pure module is pure by living in a `core` folder (checked by
`lint-imports` on a scratch copy with a bad file added or a pure module moved out), one name per job in
every folder, and the app root holds only domains, the two infrastructure folders and the wiring."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
ROOT_MODULES = {"__init__", "__main__", "main", "sources", "pages", "models"}
INFRASTRUCTURE = {"platform", "web"}


def _lint_imports(tree: Path) -> subprocess.CompletedProcess:
    # From the copy's own folder: lint-imports puts the working directory first on sys.path, so the
    # copy's `app` (and `tools`, which holds the `core_only` contract type) is the one read.
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=tree, capture_output=True, text=True, timeout=300
    )


@pytest.fixture()
def scratch(tmp_path: Path) -> Path:
    for name in ("app", "tools"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_contracts_hold_on_an_unchanged_copy(scratch: Path):
    run = _lint_imports(scratch)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_a_database_import_in_a_core_folder_breaks_the_pure_core_contract(scratch: Path):
    (scratch / "app" / "memory" / "scenes" / "core" / "sneaky.py").write_text(
        "import sqlmodel  # noqa: F401\n"
    )
    run = _lint_imports(scratch)
    assert run.returncode != 0
    assert "app.memory.scenes.core.sneaky -> sqlmodel" in run.stdout


def test_a_pure_module_moved_out_of_core_breaks_the_core_only_contract(scratch: Path):
    # prompt/core/tokens.py is used by the prompt builder (core): moved beside the services, the
    # builder now imports a module outside any core folder.
    (scratch / "app" / "prompt" / "core" / "tokens.py").rename(scratch / "app" / "prompt" / "tokens.py")
    for py in (scratch / "app").rglob("*.py"):
        text = py.read_text()
        if "app.prompt.core.tokens" in text or "from app.prompt.core import tokens" in text:
            py.write_text(
                text.replace("app.prompt.core.tokens", "app.prompt.tokens").replace(
                    "from app.prompt.core import tokens", "from app.prompt import tokens"
                )
            )
    run = _lint_imports(scratch)
    assert run.returncode != 0
    assert "app.prompt.core.builder is not allowed to import app.prompt.tokens" in run.stdout


def _folders() -> list[Path]:
    return [p for p in (ROOT / "app").rglob("*") if p.is_dir() and (p / "__init__.py").exists()]


def _same_job(a: str, b: str) -> bool:
    """Two module names that differ only by a plural, or by a prefix or suffix word (`check`/`checks`,
    `prepare`/`prepare_api`, `jobs`/`continuity_jobs`, `runs`/`day_runs`)."""
    if a.rstrip("s") == b.rstrip("s"):
        return True
    return any(long.startswith(short + "_") or long.endswith("_" + short) for long, short in ((a, b), (b, a)))


def test_no_folder_has_two_modules_named_for_one_job():
    pairs = []
    for folder in _folders():
        names = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("__"))
        pairs += [
            f"{folder.relative_to(ROOT)}: {a} / {b}" for a, b in combinations(names, 2) if _same_job(a, b)
        ]
    assert not pairs, "modules that differ only by a plural, prefix or suffix:\n" + "\n".join(pairs)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("check", "checks"),
        ("prepare", "prepare_api"),
        ("jobs", "continuity_jobs"),
        ("runs", "day_runs"),
        ("sources", "builtin_sources"),
    ],
)
def test_the_name_rule_sees_the_pairs_the_issue_named(a: str, b: str):
    assert _same_job(a, b)


def test_the_name_rule_lets_different_jobs_be():
    assert not _same_job("format_card", "format_st")
    assert not _same_job("embedders", "embedding")
    assert not _same_job("service", "source")


def test_the_app_root_holds_domains_infrastructure_and_the_wiring_only():
    modules = {p.stem for p in (ROOT / "app").glob("*.py")}
    assert modules <= ROOT_MODULES, (
        f"modules at app/ that belong in a folder: {sorted(modules - ROOT_MODULES)}"
    )
    folders = {p.name for p in (ROOT / "app").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert INFRASTRUCTURE <= folders


def test_every_core_folder_is_named_in_the_pure_core_contract():
    # The contracts name `app.*.core`, `app.memory.*.core` and `app.tools.*.core`: a core folder deeper
    # than that would escape them.
    text = (ROOT / "pyproject.toml").read_text()
    patterns = set(re.findall(r'"(app(?:\.[\w*]+)*\.core)"', text))
    assert patterns == {"app.*.core", "app.memory.*.core", "app.tools.*.core"}
    for folder in _folders():
        if folder.name == "core":
            parts = folder.relative_to(ROOT).parts
            assert len(parts) == 3 or (len(parts) == 4 and parts[1] in ("memory", "tools")), (
                f"{folder} is outside the patterns"
            )


def test_the_formatter_runs_in_make_test_and_skips_only_tables_that_say_why():
    makefile = (ROOT / "Makefile").read_text()
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "ruff format --check app tests bench tools" in test_recipe
    skips = [
        f"{py.relative_to(ROOT)}:{n}: {line.strip()}"
        for py in (ROOT / "app").rglob("*.py")
        for n, line in enumerate(py.read_text().splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    ]
    assert len(skips) < 20, "\n".join(skips)
    unexplained = [s for s in skips if not re.search(r"# fmt: skip # \w.{10,}", s)]
    assert not unexplained, "a `# fmt: skip` says why (`# fmt: skip # a table: ...`):\n" + "\n".join(
        unexplained
    )
