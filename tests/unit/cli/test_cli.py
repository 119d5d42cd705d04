"""The command front: help, configuration errors and missing subcommands map to exit codes."""

from __future__ import annotations

import pytest

from garmexport.cli import main as cli


def test_help_lists_every_subcommand_and_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out
    assert "130" in out and "configuration error" in out


def test_config_prints_the_effective_configuration_with_secrets_masked(capsys, monkeypatch):
    monkeypatch.setenv("GARMEXPORT_WRITER_MAX_FILE_AGE_S", "12")
    monkeypatch.setenv("GARMEXPORT_KAFKA_SASL_PASSWORD", "hunter2")
    assert cli.main(["config"]) == 0
    out = capsys.readouterr().out
    assert "max_file_age_s = 12.0" in out
    assert '"sasl.password" = "***"' in out and "hunter2" not in out


def test_a_configuration_error_exits_2_naming_the_file(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text("[writer]\nmax_file_rows = -5\n")
    assert cli.main(["config", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "writer.max_file_rows" in err and str(path) in err


def test_a_subcommand_whose_module_is_missing_exits_2(monkeypatch, capsys):
    monkeypatch.setitem(cli.COMMANDS, "nothing", ("placeholder", "placeholder"))
    assert cli.main(["nothing"]) == 2
    assert "not implemented yet" in capsys.readouterr().err


def test_the_demo_progress_line_never_shows_a_lag_below_what_is_unread():
    from garmexport.cli.demo import progress_line

    # the lag gauge read a moment before the consumed counter: it must not contradict it
    assert progress_line(0, 5000, 4846).endswith(
        "lag 5000: 5000 to read, 0 read and waiting in files not yet published "
        "(writer.max_file_age_s)")
    assert ", lag 300: 100 to read, 200 read and waiting" in progress_line(4900, 5000, 300)
    assert progress_line(0, 5000, None).endswith("lag not known yet (partitions being assigned)")
