"""Settings defaults are the command line's defaults."""

from exporter.cli.main import _check_parser, _check_settings, _export_parser
from exporter.cli.settings import CheckSettings, ExportSettings


def test_defaults_match_the_command_line():
    export_args = _export_parser().parse_args(["m.py:M"])
    settings = ExportSettings("m.py:M")
    assert (settings.rtol, settings.atol, settings.train, settings.verify) == (
        export_args.rtol, export_args.atol, export_args.train, export_args.verify
    )
    assert settings.dynamic == export_args.dynamic == []
    assert settings.report_submodules is export_args.report_submodules is False
    # check's flags default to None, so that [tool.exporter] can set them; unset everywhere, they are the settings' defaults
    check_args = _check_parser().parse_args(["m.py:M"])
    check = CheckSettings(["m.py:M"])
    assert (check_args.rtol, check_args.atol, check_args.jobs, check_args.baseline, check_args.shard) == (None,) * 5
    assert _check_settings(check_args) == check
