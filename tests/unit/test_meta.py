"""Checks on the code base itself."""

import ast
import re
from pathlib import Path

from app.web.templates import env

ROOT = Path(__file__).resolve().parents[2]


def test_every_block_a_route_renders_exists_in_its_template():
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


def _block_uses() -> dict[str, tuple[set[str], set[str], set[str]]]:
    """Per module of app/: (templates it names, blocks it renders, blocks it sends out of band).
    Blocks are read from `block=`, `blocks=` and `oob=` arguments, and from the lists given to a
    `*_blocks(...)` helper, so constants like `BOOK = "lore/book.html"` are followed too."""
    found = {}
    for py in (ROOT / "app").rglob("*.py"):
        tree = ast.parse(py.read_text())
        templates = {
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and re.fullmatch(r"[\w/]+\.html", n.value)
        }
        blocks, oob = set(), set()
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            name = getattr(call.func, "id", getattr(call.func, "attr", ""))
            for kw in call.keywords:
                if kw.arg in ("block", "blocks", "oob"):
                    strings = {
                        n.value
                        for n in ast.walk(kw.value)
                        if isinstance(n, ast.Constant) and isinstance(n.value, str)
                    }
                    (oob if kw.arg == "oob" else blocks).update(strings)
            if name.endswith("_blocks"):
                lists = [a for a in call.args if isinstance(a, (ast.List, ast.Tuple))]
                for i, arg in enumerate(lists):
                    (oob if i == 1 else blocks).update(
                        e.value for e in arg.elts if isinstance(e, ast.Constant)
                    )
        if blocks or oob:
            found[str(py.relative_to(ROOT))] = (templates, blocks, oob)
    return found


# Blocks that fill a container of another page (the chat's side panel and dialogs, innerHTML), not
# an element of their own.
INNER_BLOCKS = {"settings_panel", "prompt_body", "context_body"}


def _block_source(source: str, block: str) -> str:
    start = re.search(r"{%-? block " + block + r"\b(?!_)", source).start()
    return source[start : source.index("{% endblock", start)]


def test_every_fragment_block_exists_is_named_after_its_element_and_oob_ones_say_so():
    uses = _block_uses()
    # The fragments of issue 9 must be among what this test sees.
    assert {"entry", "entry_list", "entry_count", "book_message"} <= uses["app/lore/routes.py"][1] | uses[
        "app/lore/routes.py"
    ][2]
    assert {"memory_status", "memory_list"} <= uses["app/memory/recall/routes.py"][1]
    assert "chat_list" in uses["app/chats/routes.py"][1]
    for module, (templates, blocks, oob) in uses.items():
        for block in blocks | oob:
            owners = [t for t in templates if block in env.get_template(t).blocks]
            assert owners, f"{module} renders block {block}, which none of {sorted(templates)} has"
            for template in owners:
                source = (ROOT / "templates" / template).read_text()
                own = (
                    _block_source(source, block)
                    if block != "content"
                    else (ROOT / "templates/base.html").read_text()
                )
                element = block.replace("_", "-")
                if block not in INNER_BLOCKS:
                    assert f'id="{element}"' in own or f'id="{element}-{{{{' in own, (
                        f"{template}: block {block} has no #{element}"
                    )
                if block in oob:
                    assert "hx-swap-oob" in own, (
                        f"{template}: block {block} is sent out of band but never says so"
                    )
