"""--shard K/N: disjoint shares covering every model, the same split on every machine,
balanced by recorded durations or by count."""

import random

import pytest

from exporter import InputSpecError
from exporter.cli.shard import parse_shard, split

MODELS = [f"models/m{i}.py:M" for i in range(10)]


def test_shares_cover_every_model_once_in_the_given_order():
    for count in (1, 2, 3, 4, 10, 12):
        shares = split(MODELS, count)
        assert len(shares) == count
        assert sorted(m for share in shares for m in share) == sorted(MODELS)
        assert all(share == [m for m in MODELS if m in share] for share in shares)
        assert max(map(len, shares)) - min(map(len, shares)) <= 1  # by count


def test_the_split_depends_only_on_its_inputs():
    durations = {m: random.Random(i).uniform(0.1, 30) for i, m in enumerate(MODELS)}
    assert split(MODELS, 3, durations) == split(list(MODELS), 3, dict(reversed(list(durations.items()))))


def test_recorded_durations_balance_the_shares():
    durations = {MODELS[0]: 60.0, MODELS[1]: 20.0, MODELS[2]: 20.0, **{m: 1.0 for m in MODELS[3:]}}
    shares = split(MODELS, 2, durations)
    assert shares[0] == [MODELS[0]]  # the long model alone; by count it would share with four
    loads = [sum(durations[m] for m in share) for share in shares]
    assert loads == [60.0, 47.0]
    # a model the baseline has not timed yet counts as the average of those it has
    assert sorted(m for s in split(MODELS + ["new.py:N"], 2, durations) for m in s) == sorted(MODELS + ["new.py:N"])


@pytest.mark.parametrize("text, message", [("1", "not of the form K/N"), ("0/2", "between 1 and N"), ("3/2", "between 1 and N"), ("a/b", "not of the form")])
def test_bad_shards_are_input_errors(text, message):
    with pytest.raises(InputSpecError, match=message):
        parse_shard(text)
    assert parse_shard(" 2 / 4 ") == (2, 4)
