"""The name a misspelt word may have meant, for an error message's ' (did you mean 'x'?)'."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def closest(
    word: str,
    known: Iterable[str],
    *,
    synonyms: Mapping[str, str] | None = None,
    cutoff: float = 0.6,
) -> str | None:
    """The known name word may mean: the one synonyms give for it (other tools' names), else
    the closest by spelling; None when nothing is close."""
    import difflib  # lazy: error messages only, never a run's path

    names = sorted(known)
    synonym = (synonyms or {}).get(word.lower())
    if synonym in names:
        return synonym
    near = difflib.get_close_matches(word, names, n=1, cutoff=cutoff)
    return near[0] if near else None


def did_you_mean(
    word: str,
    known: Iterable[str],
    *,
    synonyms: Mapping[str, str] | None = None,
    cutoff: float = 0.6,
) -> str:
    """' (did you mean 'x'?)' for closest(), or '' when nothing is close."""
    meant = closest(word, known, synonyms=synonyms, cutoff=cutoff)
    return f" (did you mean {meant!r}?)" if meant else ""
