from kit.kernel.capabilities import APIS, apis_of, has_api, has_feature


def test_api_availability_matches_measured_releases():
    assert apis_of("1.0.0.post4") == ("export", "save_params", "module_checkpoint")
    assert apis_of("1.1.0") == ("export", "save_params", "module_checkpoint")
    assert apis_of("1.2.1") == APIS
    assert apis_of("1.9.1") == APIS


def test_missing_api_says_why():
    ok, reason = has_api("1.1.0", "save_parameters")
    assert not ok and "1.2" in reason
    assert has_api("1.2.1", "save_parameters") == (True, None)


def test_features():
    assert not has_feature("1.0.0.post4", "gluon_transforms")[0]
    assert has_feature("1.1.0", "gluon_transforms")[0]
    assert not has_feature("1.1.0", "symbolblock_imports")[0]
    assert has_feature("1.2.1", "symbolblock_imports")[0]
    assert not has_feature("1.4.1", "runtime_features")[0]
    assert has_feature("1.5.1", "runtime_features")[0]


def test_unknown_api_is_an_error():
    try:
        has_api("1.9.1", "pickle")
    except KeyError as e:
        assert "export" in str(e)
    else:
        raise AssertionError("no error for an unknown API")
