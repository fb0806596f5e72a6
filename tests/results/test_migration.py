"""The migrating-to-2.0 table, from records (host logic only: no environments)."""

from kit.results import migration


def _rec(saved, model, api, loaded, verdict, path=None, reason=None, attempts=()):
    return {
        "saved_with": saved,
        "model": model,
        "api": api,
        "loaded_with": loaded,
        "verdict": verdict,
        "load_path": path,
        "reason": reason,
        "load_attempts": list(attempts),
    }


NAIVE = {
    "path": "mx.model.load_checkpoint",
    "error": "Traceback...\nMXNetError: np shape",
    "headline": "MXNetError: np shape",
}
RECORDS = [
    _rec("1.9.1", "mlp", "export", "2.0.0b1", "identical", "SymbolBlock.imports"),
    _rec("1.9.1", "lstm", "export", "2.0.0b1", "infer-error", "SymbolBlock.imports", "case 'batch': Shape"),
    _rec("1.9.1", "mlp", "module_checkpoint", "2.0.0b1", "close", "SymbolBlock.imports", attempts=[NAIVE]),
    _rec(
        "1.9.1",
        "mlp",
        "save_params",
        "2.0.0b1",
        "unsupported",
        None,
        "loading release: Block.save_params/load_params were removed in MXNet 2.0; workaround: re-save",
    ),
    _rec(
        "1.0.0.post4",
        "mlp",
        "save_parameters",
        "2.0.0b1",
        "unsupported",
        None,
        "saving release: Block.save_parameters/load_parameters arrived in MXNet 1.2",
    ),
    _rec("1.9.1", "mlp", "export", "1.9.1", "identical", "SymbolBlock.imports"),  # not a migration
    _rec("2.0.0b1", "mlp", "export", "2.0.0b1", "identical", "SymbolBlock.imports"),  # 2.0's own
    _rec("1.9.1", "mlp", "export", "2.0.0a0", "close", "SymbolBlock.imports"),
]


def test_rows_are_api_by_saving_release_and_columns_each_2_0_release():
    df = migration.table(RECORDS)
    assert list(df.columns) == ["in 2.0.0a0", "in 2.0.0b1"]
    assert list(df.index) == [("export", "1.9.1"), ("save_params", "1.9.1"), ("module_checkpoint", "1.9.1")]
    assert df.loc[("export", "1.9.1"), "in 2.0.0b1"] == "infer-error 1 (lstm), identical 1 via SymbolBlock.imports"
    assert df.loc[("export", "1.9.1"), "in 2.0.0a0"] == "close 1 via SymbolBlock.imports"
    assert df.loc[("save_params", "1.9.1"), "in 2.0.0b1"] == (
        "unsupported 1: Block.save_params/load_params were removed in MXNet 2.0; workaround: re-save"
    )
    assert df.loc[("module_checkpoint", "1.9.1"), "in 2.0.0a0"] == ""


def test_detail_names_the_naive_path_that_failed():
    df = migration.table(RECORDS, detail=True)
    assert (
        df.loc[("mlp", "module_checkpoint", "1.9.1"), "naive path"] == "mx.model.load_checkpoint: MXNetError: np shape"
    )
    assert df.loc[("mlp", "export", "1.9.1"), "naive path"] == ""


def test_markdown_is_empty_without_2_0_and_a_table_with_it():
    assert migration.markdown([r for r in RECORDS if r["loaded_with"] == "1.9.1"]) == []
    lines = migration.markdown(RECORDS)
    assert lines[0] == "| API | saved with | in 2.0.0a0 | in 2.0.0b1 |"
    assert "| module_checkpoint | 1.9.1 |  | close 1 via SymbolBlock.imports |" in lines


def test_a_cell_says_which_models_a_verified_remedy_fixed():
    fixed = _rec("1.9.1", "lstm", "export", "2.0.0b1", "infer-error", "SymbolBlock.imports")
    fixed["remedy"] = {"fixed": True, "name": "legacy_shape_semantics", "verdict": "identical"}
    other = _rec("1.9.1", "lenet", "export", "2.0.0b1", "close", "SymbolBlock.imports")
    assert migration.cell_text([fixed, other]) == (
        "infer-error 1 (lstm), close 1 via SymbolBlock.imports; remedied: lstm by legacy_shape_semantics (identical 1)"
    )
