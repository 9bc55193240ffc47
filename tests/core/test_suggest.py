"""The name a misspelt word may have meant: other tools' names first, then spelling."""

from storbench.core.suggest import closest, did_you_mean


def test_a_misspelling_gets_the_closest_known_name():
    assert closest("iteration", ["iterations", "target", "tool"]) == "iterations"
    assert did_you_mean("iteration", ["iterations"]) == " (did you mean 'iterations'?)"


def test_another_tools_name_wins_over_spelling_and_is_read_in_any_case():
    synonyms = {"proxyjump": "jump"}
    assert closest("ProxyJump", ["jump", "port"], synonyms=synonyms) == "jump"
    # a synonym naming what this place does not know is not offered
    assert closest("ProxyJump", ["port"], synonyms=synonyms) is None


def test_nothing_close_gives_no_guess_and_the_cutoff_is_the_callers():
    assert did_you_mean("password", ["user", "port", "jump"]) == ""
    assert closest("posix", ["posixaio"]) == "posixaio"
    assert closest("posix", ["posixaio"], cutoff=0.8) is None
