from rich.console import Console

from tfguard.reference import render_demo


def test_demo_trains_exports_and_proves_parity(demo_run):
    assert demo_run.train.epochs == [0, 1, 2, 3]
    assert demo_run.train.test_metrics["accuracy"] > 0.5  # four epochs on 270 real digits
    assert demo_run.parity.ok
    assert demo_run.lines[-1] == "parity ok on 256 held-out samples"
    console = Console(record=True, width=140)
    render_demo(demo_run, console)
    text = console.export_text()
    for expected in (
        "training run",
        "model.tflite",
        "input contract: images uint8",
        "saved_model↔tflite",
    ):
        assert expected in text
