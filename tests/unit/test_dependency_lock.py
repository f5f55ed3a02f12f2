"""The dependencies are installed from the lock files, at their pinned versions and hashes.

pyproject.toml keeps the ranges; `make lock` writes requirements/test.txt (runtime and test extras) and
requirements/run.txt (runtime only, at the same pins); `make run` and `make test` install from them with
`pip install --require-hashes`. These tests fail when a requirement is missing from a lock, when the
Makefile installs anything by another way, and when the environment running them was not installed
from the lock (after `make lock`, `make test` reinstalls it).
"""

import importlib.metadata
import os
import re
import subprocess
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
RUN_LOCK = "requirements/run.txt"
TEST_LOCK = "requirements/test.txt"


def _pins(lock: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (pinned version, its hashes), read from a pip-compile lock."""
    text = re.sub(r"\\\n", " ", (ROOT / lock).read_text())
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        spec, *options = line.split()
        name, version = spec.split("==")
        hashes = [option.removeprefix("--hash=") for option in options if option.startswith("--hash=sha256:")]
        pins[canonicalize_name(name)] = (version, hashes)
    assert pins, f"{lock} pins nothing"
    return pins


def _pyproject_requirements(*, test: bool) -> list[Requirement]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names = pyproject["project"]["dependencies"] + pyproject["build-system"]["requires"]
    if test:
        names += pyproject["project"]["optional-dependencies"]["test"]
    return [Requirement(name) for name in names]


def test_every_requirement_of_pyproject_is_pinned_within_its_range_with_hashes():
    for lock, test in ((RUN_LOCK, False), (TEST_LOCK, True)):
        pins = _pins(lock)
        for requirement in _pyproject_requirements(test=test):
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{lock} does not pin {name}: run `make lock`"
            version, _ = pins[name]
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{lock} pins {name}=={version}, outside pyproject.toml's {requirement}: run `make lock`"
            )
        for name, (version, hashes) in pins.items():
            assert hashes, f"{lock} pins {name}=={version} with no hash"


def test_the_run_lock_pins_what_the_test_lock_pins():
    run, test = _pins(RUN_LOCK), _pins(TEST_LOCK)
    for name, pin in run.items():
        assert test.get(name) == pin, f"{name} is {pin[0]} in {RUN_LOCK} but {test.get(name)} in {TEST_LOCK}"


def test_the_running_environment_holds_the_locked_versions():
    differ = {}
    for name, (version, _) in _pins(TEST_LOCK).items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            differ[name] = f"locked {version}, installed {installed}"
    assert not differ, f"not installed from {TEST_LOCK} (`make install-test` reinstalls): {differ}"


def _make_dry_run(*args: str, venv: Path) -> list[str]:
    """The commands `make` would run, printed and not run (-n). The flags and variables of a `make test`
    that runs these tests are not passed on."""
    env = {key: value for key, value in os.environ.items() if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "-n", *args, f"VENV={venv}"], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def test_make_installs_packages_only_from_the_locks_with_their_hashes(tmp_path):
    for target, locks in (("run", [RUN_LOCK]), ("test", [RUN_LOCK, TEST_LOCK])):
        installs = [line for line in _make_dry_run("-B", target, venv=tmp_path) if "pip install" in line]
        for lock in locks:
            assert any(f"--require-hashes -r {lock}" in line for line in installs), (target, lock, installs)
        for line in installs:
            # Besides the locks, only pip itself (the venv's bootstrap) and the project without its
            # dependencies are installed.
            reads_a_lock = re.search(r"--require-hashes -r requirements/\w+\.txt$", line)
            assert reads_a_lock or line.endswith("--upgrade pip") or "--no-deps" in line, (target, line)


def test_a_changed_lock_reinstalls(tmp_path):
    (tmp_path / "bin").mkdir()
    for stamp in ("bin/python", ".installed", ".installed-test"):
        (tmp_path / stamp).touch()
    assert not [line for line in _make_dry_run("install-test", venv=tmp_path) if "pip install" in line]
    for lock in (RUN_LOCK, TEST_LOCK):
        installs = _make_dry_run("-W", lock, "install-test", venv=tmp_path)
        assert any(f"--require-hashes -r {lock}" in line for line in installs), (lock, installs)
