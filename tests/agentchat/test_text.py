"""agentchat.text: text as every database stores it."""

from __future__ import annotations

from agentchat.text import storable


def test_nul_characters_are_dropped_and_lone_surrogates_replaced_in_strings_keys_and_lists():
    value = {"a\x00b": ["c\ud800d", {"e": "\udfff"}], "plain": "ascii", "pair": "😀", "n": 3, "none": None}

    assert storable(value) == {
        "ab": ["c\ufffdd", {"e": "\ufffd"}],
        "plain": "ascii",
        "pair": "😀",  # a whole pair is a character, kept
        "n": 3,
        "none": None,
    }
    assert storable("nul\x00 and \ud800") == "nul and \ufffd"
    assert storable("") == ""
