"""The Python API's typed keywords are the command's options: the same names, the same types."""

from __future__ import annotations

import typing

import pytest

from ctxrag.keywords import EvaluateKeywords, IndexKeywords
from ctxrag.tasks.options import EvaluateOptions, IndexOptions, flat_options


@pytest.mark.parametrize(
    ("keywords", "options", "left_out"),
    [
        (IndexKeywords, IndexOptions, set()),
        (EvaluateKeywords, EvaluateOptions, set()),
    ],
    ids=["index", "evaluate"],
)
def test_each_keyword_is_an_option_of_the_same_type(keywords: type, options: type, left_out: set[str]) -> None:
    expected = {option.name: option.annotation for option in flat_options(options) if option.name not in left_out}
    assert typing.get_type_hints(keywords) == expected  # (search's: tests/tasks/common/test_search_request.py)
