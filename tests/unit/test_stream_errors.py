"""How an error sent inside an already started stream is classified."""

from app.connections.providers._http import CallState, error_from_stream_payload
from app.connections.providers.base import ProviderConfig

STATE = CallState(
    base_url="http://127.0.0.1:1/v1",
    config=ProviderConfig(kind="openai", base_url="http://127.0.0.1:1/v1", model="m"),
)


def test_a_numeric_code_gives_the_status():
    assert error_from_stream_payload({"code": "429", "message": "slow down"}, STATE).status == 429


def test_a_code_of_digits_python_cannot_read_as_a_number_is_only_a_label():
    # "³".isdigit() is True but int("³") raises: the classifier answered with a crash instead of an error.
    err = error_from_stream_payload({"code": "³", "message": "odd"}, STATE)
    assert err.status is None and "odd" in str(err)
