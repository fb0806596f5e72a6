"""Which Dask worker runs which release (kit.execute.dask_executor.route): pure host logic, no cluster."""

from __future__ import annotations

import pytest

from kit.common.errors import KitError, UsageError
from kit.execute.dask_executor import route

A, B, C = "tcp://10.0.0.1:40001", "tcp://10.0.0.2:40001", "tcp://10.0.0.3:40001"


def test_no_workers_is_an_error_that_says_how_to_start_them():
    with pytest.raises(KitError) as e:
        route(["1.9.1"], {}, {})
    assert not isinstance(e.value, UsageError) and e.value.exit_code == 3
    assert e.value.message == "the Dask cluster has no workers"
    assert "dask worker" in e.value.hint


def test_a_worker_that_has_the_environment_wins_even_when_busier():
    ready = {A: ["1.9.1"], B: []}
    names = {A: "w1", B: "w2"}
    # 1.0.0.post4 is nowhere: the least loaded (a tie, so w1 by name); 1.9.1 stays on w1, which has it
    assert route(["1.0.0.post4", "1.9.1"], ready, names) == {"1.0.0.post4": A, "1.9.1": A}


def test_without_environments_releases_spread_to_the_least_loaded():
    ready = {A: [], B: [], C: []}
    names = {A: "w1", B: "w2", C: "w3"}
    releases = ["0.11.0", "1.0.0.post4", "1.9.1", "2.0.0b1", "2.0.0a0"]
    assert route(releases, ready, names) == {"0.11.0": A, "1.0.0.post4": B, "1.9.1": C, "2.0.0b1": A, "2.0.0a0": B}


def test_ties_go_by_worker_name_not_address():
    ready = {A: [], B: []}
    assert route(["1.9.1"], ready, {A: "zeta", B: "alpha"}) == {"1.9.1": B}
    assert route(["1.9.1", "2.0.0b1"], ready, {A: "zeta", B: "alpha"}) == {"1.9.1": B, "2.0.0b1": A}
    # a worker without a name is ordered by its address
    assert route(["1.9.1"], {C: [], B: []}, {}) == {"1.9.1": B}
    assert route(["1.9.1"], {A: [], B: []}, {B: "tcp://0"}) == {"1.9.1": B}


def test_among_workers_that_have_it_the_least_loaded_then_by_name():
    ready = {A: ["1.9.1", "1.0.0.post4"], B: ["1.9.1"], C: []}
    names = {A: "w1", B: "w2", C: "w3"}
    # 1.0.0.post4 only on w1; then 1.9.1 on both w1 (load 1) and w2 (load 0): w2; 2.0.0b1 nowhere: w3 (load 0)
    assert route(["1.0.0.post4", "1.9.1", "2.0.0b1"], ready, names) == {
        "1.0.0.post4": A,
        "1.9.1": B,
        "2.0.0b1": C,
    }


def test_the_same_cluster_routes_the_same_way_every_time():
    ready = {C: ["1.9.1"], A: [], B: ["1.0.0.post4"]}
    names = {A: "w1", B: "w2", C: "w3"}
    releases = ["1.0.0.post4", "1.9.1", "2.0.0b1", "1.5.1"]
    first = route(releases, ready, names)
    assert first == {"1.0.0.post4": B, "1.9.1": C, "2.0.0b1": A, "1.5.1": A}
    reordered = {B: ["1.0.0.post4"], A: [], C: ["1.9.1"]}  # workers listed in another order
    assert route(releases, reordered, names) == first


def test_no_releases_routes_nothing():
    assert route([], {A: ["1.9.1"]}, {A: "w1"}) == {}
