from app.prompt.core.layout import GROUP_OF, GROUPS, LAYOUT, depth_index, dynamic_insert_index


def test_layout_is_in_group_order_and_every_kind_has_one_group():
    order = [GROUPS.index(slot.group) for slot in LAYOUT]
    assert order == sorted(order)
    assert len(GROUP_OF) == len(LAYOUT)


def test_dynamic_group_goes_above_the_four_newest_speaker_turns():
    speakers = ["A", "U", "A", "A", "U", "A", "U", "U", "A"]
    # turns from the end: A | U U | A | U  -> the fourth starts at index 4
    assert dynamic_insert_index(speakers) == 4
    assert dynamic_insert_index(["A", "U", "A"]) == 0  # short chat: above everything
    assert dynamic_insert_index([]) == 0


def test_depth_index():
    assert depth_index(10, 0) == 10
    assert depth_index(10, 2) == 8
    assert depth_index(3, 7) == 0
