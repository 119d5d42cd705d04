"""The quick local profile and the thorough CI one are chosen by the environment."""

from __future__ import annotations

from hypothesis import settings

from tests.hypothesis_profiles import chosen, examples


def test_ci_in_the_environment_chooses_the_thorough_profile() -> None:
    assert chosen({"CI": "true"}) == "ci"
    assert chosen({}) == "dev"
    assert chosen({"CI": ""}) == "dev"
    assert chosen({"CI": "true", "HYPOTHESIS_PROFILE": "dev"}) == "dev"


def test_the_thorough_profile_runs_what_a_test_states_and_the_quick_one_a_tenth() -> None:
    assert examples(400, {"CI": "1"}) == 400
    assert examples(400, {}) == 40
    assert examples(20, {}) == 10  # never fewer than 10


def test_a_profile_is_loaded_for_this_run() -> None:
    assert settings().deadline is None
    assert settings().max_examples == examples(100)
