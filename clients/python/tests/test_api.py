"""The two clients offer the same calls with the same parameters."""

from __future__ import annotations

import inspect

import liverelay
from liverelay import AsyncClient, Client


def public_methods(cls: type) -> set:
    return {name for name, value in vars(cls).items() if not name.startswith("_") and callable(value)}


def test_sync_client_has_every_call_of_the_async_client() -> None:
    assert public_methods(AsyncClient) - public_methods(Client) == set()


def test_same_parameters() -> None:
    for name in public_methods(AsyncClient):
        a = list(inspect.signature(getattr(AsyncClient, name)).parameters.values())[1:]
        s = list(inspect.signature(getattr(Client, name)).parameters.values())[1:]
        assert [(p.name, p.kind, p.default) for p in a] == [(p.name, p.kind, p.default) for p in s], name
    a = inspect.signature(AsyncClient.__init__).parameters
    s = inspect.signature(Client.__init__).parameters
    assert [(p.name, p.kind) for p in a.values()] == [(p.name, p.kind) for p in s.values()]


def test_everything_exported_exists() -> None:
    for name in liverelay.__all__:
        assert hasattr(liverelay, name), name
