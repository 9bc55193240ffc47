"""Every example config, mutated at random (fixed seeds): refused with ConfigError, never a
traceback. Values become other types or empty, keys are deleted, up to three at once."""

from __future__ import annotations

import contextlib
import copy
import io
import random

import pytest

from storbench.config import campaign as config
from storbench.config.source import load_yaml
from tests.workflow.test_workflow import REPO

EXAMPLES = sorted((REPO / "config/examples").glob("*.yaml")) + [REPO / "config/config.yaml"]
REPLACEMENTS = (None, 0, -1, 1.5, "", "x", [], {}, [1], {"a": 1}, True, "4k", "1s", 10**20, "a b")
MUTATED_CONFIGS = 40  # per example: 840 in all


def key_paths(value, path: tuple = ()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from key_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from key_paths(item, (*path, index))


def mutated(raw: dict, chance: random.Random) -> dict:
    raw = copy.deepcopy(raw)
    for _ in range(chance.choice((1, 1, 2, 3))):
        path = chance.choice([p for p in key_paths(raw) if p])
        parent = raw
        for part in path[:-1]:
            parent = parent[part]
        if chance.random() < 0.25:
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(chance.choice(REPLACEMENTS))
    return raw


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_a_mutated_config_is_refused_with_its_problems_named(example):
    raw = load_yaml(example)
    chance = random.Random(example.name)
    refused = 0
    for _ in range(MUTATED_CONFIGS):
        candidate = mutated(raw, chance)
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # the configs' own warnings
                config.load_campaign(candidate, source=example.name)
        except config.ConfigError as error:
            refused += 1
            assert error.problems and all(": " in problem for problem in error.problems)
    assert refused > MUTATED_CONFIGS // 2  # the mutations mostly break the config
