"""The providers share their calls: each module says only how its API differs."""

import pytest

from app.connections.providers import anthropic, openai_compat
from app.connections.providers._calls import ProviderApi


@pytest.mark.parametrize("call", ["stream_chat", "complete_chat", "probe"])
@pytest.mark.parametrize("provider", [anthropic, openai_compat], ids=["anthropic", "openai_compat"])
def test_a_providers_calls_are_the_shared_ones(provider, call):
    # A provider module that grows its own stream_chat again would miss the next fix to how replies
    # stream or failures are worded.
    assert getattr(getattr(provider, call), "__func__", None) is getattr(ProviderApi, call)
