"""What `check_store_url` and `connection_pool` refuse before any connection is tried: a
URL that is not text, the commands' `?session=` wherever the query starts, pool sizes that
cannot be."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.errors import ConfigError
from unbounded.postgres.connect import check_store_url, connection_pool

pytest.importorskip("psycopg_pool")


@pytest.mark.parametrize("url", [None, 3, b"postgresql://h/db"])
def test_a_url_that_is_not_text_is_refused_as_such(url: Any) -> None:
    with pytest.raises(ConfigError, match="a PostgreSQL URL is text"):
        check_store_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://h/db?session=abc&x=a@b",  # an @ in the query is not the credentials'
        "postgresql:///db?x=a@b&session=abc",  # no host: the path starts at once
        "postgresql://u@?session=abc",  # the query right after the credentials
    ],
)
def test_a_session_in_the_query_is_refused_wherever_an_at_sign_is(url: str) -> None:
    with pytest.raises(ConfigError, match="session= is the commands' form"):
        check_store_url(url)


@pytest.mark.parametrize(("min_size", "max_size"), [(-1, None), (0, 0), (3, 2), (-1, 5)])
def test_pool_sizes_that_cannot_be_are_refused(min_size: int, max_size: int | None) -> None:
    with pytest.raises(ConfigError, match="pool sizes need"):
        connection_pool("postgresql://h/db", min_size=min_size, max_size=max_size)


@pytest.mark.parametrize(("min_size", "max_size"), [(0, 1), (1, 1), (0, None)])
def test_the_smallest_pool_sizes_pass_the_size_check(min_size: int, max_size: int | None) -> None:
    # a wrong scheme is refused next, before any connection: the sizes were taken
    with pytest.raises(ConfigError, match="is not a PostgreSQL URL"):
        connection_pool("mysql://h/db", min_size=min_size, max_size=max_size)
