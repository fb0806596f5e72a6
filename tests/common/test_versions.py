from kit.common.versions import at_least, base_version, direction, parse_release, release_key, same_release


def _raises(fn, *args):
    try:
        fn(*args)
    except ValueError:
        return True
    return False


def test_post_suffix_is_dropped_like_mx_version():
    assert base_version("1.7.0.post2") == "1.7.0"
    assert same_release("1.7.0.post2", "1.7.0")
    assert same_release("1.0.0.post4", "1.0.0")
    assert not same_release("1.7.0.post2", "1.8.0")


def test_2_0_releases_are_known_by_what_they_report():
    assert same_release("2.0.0a0", "2.0.0")  # measured: the 2.0.0a0 wheel reports 2.0.0
    assert same_release("2.0.0b1", "2.0.0beta1")
    assert not same_release("2.0.0b1", "2.0.0")
    assert release_key("1.9.1") < release_key("2.0.0a0") < release_key("2.0.0b1") < release_key("2.0.0")


def test_release_order():
    names = ["1.10.0", "1.9.1", "1.1.0", "1.0.0.post4", "1.1.0rc1", "1.0.0", "1.1.0.post0", "1.2.0b20180101"]
    assert sorted(names, key=release_key) == [
        "1.0.0",
        "1.0.0.post4",
        "1.1.0rc1",
        "1.1.0",
        "1.1.0.post0",
        "1.2.0b20180101",
        "1.9.1",
        "1.10.0",
    ]


def test_short_versions_are_padded():
    assert parse_release("1.9") == parse_release("1.9.0")
    assert at_least("1.9.1", "1.9")
    assert not at_least("1.8.0.post0", "1.9")


def test_release_candidates_are_older_than_the_release():
    assert not at_least("1.9.0rc1", "1.9.0")
    assert at_least("1.9.0", "1.9.0rc1")
    assert base_version("2.0.0rc1") == "2.0.0rc1"


def test_garbage_is_rejected():
    assert _raises(parse_release, "latest")
    assert _raises(parse_release, "")
    assert _raises(parse_release, "1.x")


def test_direction_of_table_and_custom_releases():
    assert direction("1.4.1", "1.9.1") == "backward"
    assert direction("1.9.1", "1.4.1") == "forward"
    assert direction("1.9.1", "1.9.1") == "same"
    assert direction("1.9.1", "2.0.0b1") == "backward"
    assert direction("rc-build", "1.9.1") == "unknown"
    assert direction("1.9.1", "rc-build") == "unknown"


def test_a_post_release_comes_after_its_release():
    assert release_key("1.1.0") < release_key("1.1.0.post0") < release_key("1.1.0.post1")
    assert direction("1.8.0", "1.8.0.post0") == "backward"
    assert same_release("1.8.0.post0", "1.8.0")  # mx.__version__ drops the suffix


def test_a_runtime_is_its_release_with_tags():
    from kit.common.versions import is_runtime, release_of, runtime_tags, sort_key

    name = "1.9.1+py3.12+numpy1.26.4"
    assert is_runtime(name) and not is_runtime("1.9.1")
    assert release_of(name) == "1.9.1" and runtime_tags(name) == ("py3.12", "numpy1.26.4")
    assert release_key(name) == release_key("1.9.1") and same_release(name, "1.9.1")
    assert at_least("1.7.0.post2+native", "1.7.0") and not at_least("1.6.0+mkl", "1.7.0")
    assert direction("1.9.1", name) == "runtime" and direction(name, "1.9.1") == "runtime"
    assert direction(name, name) == "same" and direction("1.6.0", "1.7.0.post2+native") == "backward"
    assert sorted([name, "2.0.0b1", "1.9.1", "1.6.0+mkl"], key=sort_key) == ["1.6.0+mkl", "1.9.1", name, "2.0.0b1"]
