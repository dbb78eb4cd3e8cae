"""Deleting an index that lives in Elasticsearch, against the noida-db Elasticsearch EMULATOR (not a real cluster).

The local folder holds the manifests (each kept version names its physical index); the delete must remove the alias
and every physical index of the name in the emulator as well, and keep the folder when the emulator cannot be reached.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch
from typer.testing import CliRunner

from ctxrag.storage.elasticsearch import EsConfigError, EsIndex, connect
from ctxrag.storage.errors import UserError
from ctxrag.storage.index_store import IndexStore
from tests.helpers import chunk_table, chunk_vectors


@pytest.fixture
def emulator(es_emulator_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Elasticsearch]:
    monkeypatch.setenv("ELASTICSEARCH_URL", es_emulator_url)
    client = connect(es_emulator_url, request_timeout=10)
    yield client
    client.close()


def publish_on_elasticsearch(store: IndexStore, name: str, live: bool = True) -> str:
    """A version built by the elasticsearch backend (a physical index behind the alias); returns the physical name."""
    rows = chunk_table()
    folder = store.publish(
        name, {"config": {"backend": "elasticsearch"}}, rows, rows["content"].to_pylist(), chunk_vectors(), live=live
    )
    return json.loads((folder / "manifest.json").read_text())["elasticsearch"]["index"]


def physical_indexes(client: Elasticsearch, name: str) -> list[str]:
    found = client.indices.get(index=f"{name}-v*", expand_wildcards="open,closed", allow_no_indices=True).body
    return sorted(found)


def test_delete_removes_the_alias_and_every_physical_index_of_the_name(emulator: Elasticsearch, tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    publish_on_elasticsearch(store, "del-es")
    live = publish_on_elasticsearch(store, "del-es")  # the alias moves; the first local version is kept
    staged = publish_on_elasticsearch(store, "del-es", live=False)  # a version under a quality gate
    emulator.indices.create(index="del-es-v9")  # left over by a build that died
    other = publish_on_elasticsearch(store, "del-es-other")  # a name sharing the prefix: not touched
    assert EsIndex(emulator, "del-es").live_index() == live
    assert physical_indexes(emulator, "del-es") == sorted([live, staged, "del-es-v9"])
    assert len(store.kept_manifests("del-es")) == 3

    assert store.delete("del-es") is True

    assert not (store.root / "del-es").exists()
    assert not emulator.indices.exists_alias(name="del-es")
    assert physical_indexes(emulator, "del-es") == []
    assert EsIndex(emulator, "del-es-other").live_index() == other
    assert store.names() == ["del-es-other"]


def test_cli_delete_removes_the_elasticsearch_side(
    emulator: Elasticsearch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxrag.cli import app

    monkeypatch.setenv("CTXRAG_HOME", str(tmp_path))
    publish_on_elasticsearch(IndexStore(tmp_path), "del-cli")
    result = CliRunner().invoke(app, ["delete", "del-cli"])
    assert result.exit_code == 0, result.output
    assert not emulator.indices.exists_alias(name="del-cli")
    assert physical_indexes(emulator, "del-cli") == []
    assert IndexStore(tmp_path).names() == []


def test_without_a_reachable_cluster_the_local_index_is_kept(
    emulator: Elasticsearch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = IndexStore(tmp_path)
    publish_on_elasticsearch(store, "del-kept")
    monkeypatch.delenv("ELASTICSEARCH_URL")
    with pytest.raises(EsConfigError, match="no Elasticsearch URL") as raised:
        store.delete("del-kept")
    assert isinstance(raised.value, UserError)
    assert store.names() == ["del-kept"]  # the manifests still say what to remove: run the delete again
    assert emulator.indices.exists_alias(name="del-kept")

    monkeypatch.setenv("ELASTICSEARCH_URL", str(emulator.transport.node_pool.get().base_url))
    assert store.delete("del-kept") is True
    assert not emulator.indices.exists_alias(name="del-kept")
    assert physical_indexes(emulator, "del-kept") == []


def test_an_embedded_index_is_deleted_without_asking_any_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ELASTICSEARCH_URL", raising=False)
    store = IndexStore(tmp_path)
    rows = chunk_table()
    store.publish("plain", {"config": {"backend": "embedded"}}, rows, rows["content"].to_pylist(), chunk_vectors())
    assert store.delete("plain") is True
    assert store.names() == []
