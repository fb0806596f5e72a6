from kit.common import record_schema


def test_a_new_record_has_every_field_and_its_direction():
    rec = record_schema.new_record("1.4.1", "lenet", "export", "2.0.0b1", "/s/1.4.1/lenet/export")
    assert rec["schema"] == record_schema.SCHEMA == 1
    assert rec["direction"] == "backward"
    assert rec["verdict"] is None and rec["cases"] == {} and rec["load_attempts"] == []
    assert record_schema.cell_id(rec) == "lenet/export/1.4.1/2.0.0b1"


def test_flat_row_and_counts():
    recs = [
        dict(
            record_schema.new_record("1.4.1", "mlp", "export", "1.9.1", "a"), verdict="close", summary={"max_abs": 2e-6}
        ),
        dict(record_schema.new_record("1.9.1", "mlp", "export", "1.4.1", "b"), verdict="load-error"),
        dict(record_schema.new_record("1.0.0", "mlp", "export", "1.9.1", "c"), verdict="close"),
    ]
    row = record_schema.flat_row(recs[0])
    assert row["max_abs"] == 2e-6 and row["top1_agreement"] is None and row["loaded_with"] == "1.9.1"
    assert record_schema.verdict_counts(recs) == {"backward": {"close": 2}, "forward": {"load-error": 1}}
