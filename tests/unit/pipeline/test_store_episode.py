"""A store failure episode: logged once when it starts, once when it ends."""

from __future__ import annotations

from garmexport.pipeline.store_episode import StoreEpisode


def test_only_the_first_failure_starts_an_episode_and_recovery_ends_it() -> None:
    ep = StoreEpisode()
    assert ep.recovered(1.0) is None  # nothing under way
    assert ep.failed(10.0, "publish", "")  # a writer held back by the shared back-off
    assert not ep.failed(11.0, "marker", "StorageError: full")
    assert (ep.since, ep.op, ep.reason) == (10.0, "marker", "StorageError: full")
    assert not ep.failed(12.0, "publish", "StorageError: other")  # the first reason stays
    assert ep.reason == "StorageError: full"
    assert ep.recovered(15.5) == 5.5
    assert (ep.since, ep.reason) == (None, "")
    assert ep.failed(20.0, "publish", "StorageError: again")  # a new episode
