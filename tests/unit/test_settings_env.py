"""SUGO_* environment values that need checking before Sugo starts."""

from __future__ import annotations

import pytest

from app.platform.settings import load_settings


def test_model_timeout_defaults_to_five_minutes(monkeypatch):
    monkeypatch.delenv("SUGO_MODEL_TIMEOUT_S", raising=False)
    assert load_settings().model_timeout_s == 300.0


def test_model_timeout_is_read_and_bounded(monkeypatch):
    monkeypatch.setenv("SUGO_MODEL_TIMEOUT_S", "900")
    assert load_settings().model_timeout_s == 900.0
    for bad in ("0", "-5", "100000"):
        monkeypatch.setenv("SUGO_MODEL_TIMEOUT_S", bad)
        with pytest.raises(ValueError, match="SUGO_MODEL_TIMEOUT_S must be between 1 and 86400"):
            load_settings()
