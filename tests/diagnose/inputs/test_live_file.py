"""A file still being written ends inside a record: that is unfinished, not damaged (issue 46, item 8)."""

from __future__ import annotations

from tests.watch.logs import EVENT_FILE, append, epoch_records
from tfguard._cli import main
from tfguard.diagnose import diagnose_logdir


def test_an_unfinished_last_record_is_not_called_damaged(tmp_path, capsys):
    records = b"".join(epoch_records(e, 2.3 * 0.7 ** e) for e in range(5))
    more = epoch_records(5, 0.3)
    append(tmp_path / "live" / EVENT_FILE, records + more[:30])  # the writer's buffer, half flushed
    [d] = diagnose_logdir(tmp_path)
    [note] = d.notes
    assert note.startswith(f"unfinished record in event file {tmp_path / 'live' / EVENT_FILE} at offset "
                           f"{len(records)}: the file ends inside it (still being written")
    assert "damaged" not in note and d.metrics["train/loss"]["final"] > 0
    assert main(["diagnose", str(tmp_path)]) == 0  # no data lost: not exit status 2
    out = capsys.readouterr().out
    assert "unfinished record" in out and "damaged" not in out
