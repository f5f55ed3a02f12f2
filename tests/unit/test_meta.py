"""Checks on the code base itself."""

import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader

ROOT = Path(__file__).resolve().parents[2]


def test_every_block_a_route_renders_exists_in_its_template():
    env = Environment(loader=FileSystemLoader(ROOT / "templates"))
    uses = set()
    for py in (ROOT / "app").rglob("*.py"):
        text = py.read_text()
        for template, block in re.findall(r'"([\w/]+\.html)".{0,400}?block="(\w+)"', text, re.S):
            uses.add((template, block))
        for block, template in re.findall(r'block = "(\w+)".{0,200}?"([\w/]+\.html)"', text, re.S):
            uses.add((template, block))
    assert uses, "found no block renders to check"
    for template, block in uses:
        assert block in env.get_template(template).blocks, f"{template} has no block {block}"


def test_no_runtime_downloads_of_browsers_or_weights():
    for path in list((ROOT / "app").rglob("*.py")) + [ROOT / "Makefile", ROOT / ".ci" / "run"]:
        text = path.read_text()
        # Spelled in pieces so this test does not match the search it performs.
        assert "playwright " + "install" not in text and "huggingface" + ".co" not in text, path
