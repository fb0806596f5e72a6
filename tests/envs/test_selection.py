"""--save/--load selection: names, all, last:N and ranges against the release table and custom builds."""

from __future__ import annotations

import json

import pytest

from kit.common.errors import UsageError
from kit.common.versions import release_key
from kit.envs import release_selection as selection
from kit.envs import releases
from kit.envs.manager import MARKER, EnvManager
from kit.home import KitHome

TABLE = sorted(releases.RELEASES, key=release_key)


@pytest.fixture
def manager(tmp_path) -> EnvManager:
    home = KitHome(tmp_path / "home")
    custom = releases.custom_release("1.9.2rc0", python="3.8", spec="mxnet==1.9.1", expected_version="1.9.2rc0")
    path = home.envs / "1.9.2rc0"
    path.mkdir(parents=True)
    (path / MARKER).write_text(json.dumps({"release": custom.to_dict()}))
    return EnvManager(home)


def test_names_pass_through_in_order_once(manager):
    assert selection.expand("1.9.1, 1.4.1,1.9.1", manager) == ["1.9.1", "1.4.1"]
    assert selection.expand("", manager) == [] and selection.expand(None, manager) == []


def test_all_is_the_table_and_this_machines_custom_builds_in_release_order(manager):
    order = selection.expand("all", manager)
    assert order == selection.release_order(manager)
    assert set(order) == set(TABLE) | {"1.9.2rc0"}
    assert order.index("1.9.1") + 1 == order.index("1.9.2rc0") < order.index("2.0.0a0")
    assert order[0] == TABLE[0] and order[-1] == "2.0.0b1"


def test_last_n_is_the_newest_n(manager):
    assert selection.expand("last:2", manager) == ["2.0.0a0", "2.0.0b1"]
    assert selection.expand("last:1", manager) == ["2.0.0b1"]
    with pytest.raises(UsageError, match="N must be 1 or more"):
        selection.expand("last:0", manager)


def test_ranges_are_inclusive_and_may_be_open(manager):
    assert selection.expand("1.7.0.post2..1.9.1", manager) == ["1.7.0.post2", "1.8.0.post0", "1.9.1"]
    assert selection.expand("1.8.0..1.9.1", manager) == ["1.8.0.post0", "1.9.1"]  # as mx.__version__ says it
    assert selection.expand("1.9.1..", manager) == ["1.9.1", "1.9.2rc0", "2.0.0a0", "2.0.0b1"]
    assert selection.expand("..1.0.0.post4", manager) == [TABLE[0], TABLE[1]] == ["0.11.0", "1.0.0.post4"]
    # a range and a name together, without repeats
    assert selection.expand("1.8.0..1.9.1,1.9.1,1.4.1", manager) == ["1.8.0.post0", "1.9.1", "1.4.1"]


def test_bad_ranges_say_what_is_wrong(manager):
    with pytest.raises(UsageError, match="'1.3.7' is not a known release") as e:
        selection.expand("1.3.7..1.9.1", manager, flag="--load")
    assert str(e.value).startswith("--load 1.3.7..1.9.1")
    assert "1.9.2rc0" in e.value.hint
    with pytest.raises(UsageError, match="the range is empty"):
        selection.expand("1.9.1..1.4.1", manager)
