"""Shared fixtures: a real redis-server for the session, flushed before each test that uses it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.servers import redis_server


@pytest.fixture(scope="session")
def redis_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture
def redis_url(redis_server_url: str) -> Iterator[str]:
    """The URL of a real, empty redis-server (flushed before the test)."""
    import redis

    client = redis.Redis.from_url(redis_server_url)
    client.flushall()
    client.close()
    yield redis_server_url
