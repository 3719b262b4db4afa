"""Form errors read as the form does: every field a message names is named by its label, never by its code name."""
from bench_core.config.bench_config import FIELD_LABELS


def test_a_limit_across_two_fields_names_both_by_their_labels(app, manager):
    at = app()
    at.text_input(key="cfg_seq_len").set_value("4096")
    at.text_input(key="cfg_batch_size").set_value("128").run()   # 524,288 tokens a step: over the limit
    errors = [e.value for e in at.error]
    assert errors == ["Batch size = 128: Sequence length x Batch size = 524288 exceeds the limit of 262144"], errors
    assert not [name for name in FIELD_LABELS if "_" in name and any(name in e for e in errors)]
    assert [b for b in at.button if b.label == "Run"][0].disabled and manager.jobs() == []
