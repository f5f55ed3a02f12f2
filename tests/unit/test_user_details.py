"""The user's details, pure: field checks, time zones read from what people and models write, the
update a call asks for, the name a character calls the user, the prompt's lines."""

from __future__ import annotations

import zoneinfo

import pytest

from app.personas.core.details import checked_detail, read_time_zone
from app.platform.core.errors import UserError
from app.tools.user_info.core.details import Naming, called, details_text, plan_update, without_affixes

ZONES = frozenset(zoneinfo.available_timezones())


def test_a_detail_is_one_line_of_at_most_60_characters():
    assert checked_detail("Pronouns", "  she/her ") == "she/her"
    assert checked_detail("Pronouns", "x" * 60) == "x" * 60
    with pytest.raises(UserError, match="Pronouns is 61 characters long; at most 60 are kept."):
        checked_detail("Pronouns", "x" * 61)
    with pytest.raises(UserError, match="Nickname cannot contain line breaks"):
        checked_detail("Nickname", "Ma\nra")


@pytest.mark.parametrize(
    ("text", "zone"),
    [
        ("Europe/Lisbon", "Europe/Lisbon"),
        ("europe/lisbon", "Europe/Lisbon"),
        ("UTC", "UTC"),
        ("gmt", "GMT"),
        ("Z", "UTC"),
        ("UTC+3", "Etc/GMT-3"),
        ("GMT-5", "Etc/GMT+5"),
        ("+03:00", "Etc/GMT-3"),
        ("UTC+0", "UTC"),
    ],
)
def test_time_zones_by_name_or_whole_hour_offset(text, zone):
    assert read_time_zone(text, ZONES) == zone


@pytest.mark.parametrize("text", ["Mars/Olympus", "UTC+15", "somewhere", "UTC+5:30"])
def test_unknown_zones_and_half_hour_offsets_are_refused(text):
    with pytest.raises(UserError, match="not a (time zone Sugo knows|whole-hour offset)"):
        read_time_zone(text, ZONES)


def test_called_joins_prefix_nickname_and_suffix_as_they_are_written():
    assert called("Mara", Naming()) == "Mara"
    assert called("Mara", Naming(prefix="Captain")) == "Captain Mara"
    assert called("Mara", Naming(nickname="Mar", suffix="-san")) == "Mar-san"
    assert called("Mara", Naming(suffix="the Brave")) == "Mara the Brave"
    assert called("Mara", Naming(prefix="Ex-", nickname="Captain")) == "Ex-Captain"


def test_a_redundant_affix_leaves_a_new_nickname_never_a_guess():
    assert without_affixes("Captain Mara", "Captain", "") == "Mara"
    assert without_affixes("Mara-san", "", "-san") == "Mara"
    assert without_affixes("Captainia", "Captain", "") == "Captainia"  # no boundary, no cut
    assert without_affixes("Captain", "Captain", "") == "Captain"  # nothing would be left
    assert without_affixes("Big Mara", "Captain", "") == "Big Mara"  # never split on spaces


def test_plan_update_checks_everything_first_and_names_every_problem():
    with pytest.raises(UserError) as refused:
        plan_update(
            {"nickname": "x" * 61, "pronouns": "she/her", "time_zone": "Nowhere"},
            ["password", "pronouns"],
            current=Naming(),
            known_zones=ZONES,
        )
    message = str(refused.value)
    assert "“password” is no field" in message
    assert "Nickname is 61 characters long" in message
    assert "Pronouns was both given and cleared" in message
    assert "“Nowhere” is not a time zone" in message


def test_plan_update_blank_and_clear_clear_and_the_nickname_loses_the_prefix_in_force():
    update = plan_update(
        {"nickname": "Captain Mara", "suffix": " ", "pronouns": None},
        ["form_of_address"],
        current=Naming(prefix="Captain"),
        known_zones=ZONES,
    )
    assert dict(update.changes) == {"nickname": "Mara", "suffix": "", "form_of_address": ""}
    assert update.naming == {"nickname": "Mara", "suffix": ""}
    assert update.persona == {"form_of_address": ""}
    # A prefix sent in the same call counts as the one in force.
    update = plan_update({"nickname": "Dr. Mara", "prefix": "Dr."}, [], current=Naming(), known_zones=ZONES)
    assert update.changes["nickname"] == "Mara"


def test_details_text_says_only_what_is_set():
    assert (
        details_text(
            character_name="Aria",
            user_name="Mara",
            naming=Naming(),
            pronouns="",
            form_of_address="",
            time_zone="",
        )
        == ""
    )
    text = details_text(
        character_name="Aria",
        user_name="Mara",
        naming=Naming(nickname="Mar", prefix="Captain"),
        pronouns="she/her",
        form_of_address="",
        time_zone="Europe/Lisbon",
    )
    assert text == (
        "Aria calls Mara “Captain Mar” (nickname “Mar”, prefix “Captain”).\n"
        "Mara's pronouns: she/her.\n"
        "Mara's time zone: Europe/Lisbon."
    )
