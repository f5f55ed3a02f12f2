"""Meta-tests of the prompt-source seam (Datasette's habit): every hook is documented, every
registered source is named, every job it declares runs on a schedule and says what it does, and
every Chat Settings section it renders exists."""

import inspect
import re

from app.prompt.sources import PromptSource
from app.sources import default_sources
from app.web.templates import TEMPLATES_DIR

HOOKS = ("begin", "contribute", "expect", "after_reply", "jobs", "settings_section", "read_settings_form")


def test_every_hook_of_the_seam_has_a_one_line_docstring():
    for hook in HOOKS:
        doc = inspect.getdoc(getattr(PromptSource, hook))
        assert doc and "\n" not in doc.strip(), hook
        assert hook in (inspect.getdoc(inspect.getmodule(PromptSource)) or ""), (
            f"{hook} is not listed in the module"
        )


def test_every_registered_source_is_named_and_labelled():
    sources = list(default_sources())
    assert len({s.name for s in sources}) == len(sources)
    assert all(s.name and s.label for s in sources)


def test_every_job_has_an_interval_and_says_what_it_does():
    jobs = default_sources().jobs()
    assert jobs, "Memory Recall's sweep at least"
    assert len({j.id for j in jobs}) == len(jobs)
    for job in jobs:  # on demand (deferred by id) or periodic
        assert job.every_minutes is None or job.every_minutes > 0, job.id
        assert inspect.getdoc(job.func), job.id


def test_every_settings_section_template_exists():
    for source in default_sources():
        if type(source).settings_section is PromptSource.settings_section:
            continue
        method = type(source).settings_section
        names = _section_templates(inspect.getsource(method))
        if not names:  # a source that hands the section to a module of its own (scenes/settings_form.py)
            code = inspect.getsource(method)
            for attr, value in vars(inspect.getmodule(method)).items():
                if inspect.ismodule(value) and f"{attr}.settings_section(" in code:
                    names = _section_templates(inspect.getsource(value.settings_section))
        assert names, source.name
        for name in names:
            assert (TEMPLATES_DIR / name).is_file(), name


def _section_templates(code: str) -> list[str]:
    return re.findall(r'SettingsSection\(\s*"([^"]+)"', code)
