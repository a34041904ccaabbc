"""The command line: ``edgebox --version``, ``edgebox check REPOSITORY``,
``edgebox publish`` and ``edgebox serve`` refusing bad settings before it starts
anything.

``check`` and one ``publish`` run as ``python -m edgebox ...`` in a subprocess,
as a user would run them; the rest call ``cli.main`` in-process.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
from pathlib import Path

import pytest

from cli_helpers import run_edgebox
from edgebox import __version__
from edgebox.cli import build_parser, main
from edgebox.commands.console import EXIT_CONFIG, EXIT_OK, EXIT_PROBLEMS
from edgebox.commands.setting_flags import add_setting_flags
from edgebox.settings import SECTIONS, Settings, load_settings
from edgebox.settings import loader as settings_module
from model_fixtures import ADD_SUB_CONFIG, add_add_sub, write_model
from scripts.onnx_builders import build_add_sub

PIPELINE_CONFIG = """
name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [
  { name: "A" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "B" data_type: TYPE_FP32 dims: [ 16 ] }
]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 16 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "add_sub"
      model_version: -1
      input_map { key: "INPUT0" value: "A" }
      input_map { key: "INPUT1" value: "B" }
      output_map { key: "OUTPUT0" value: "SUM" }
    }
  ]
}
"""


@pytest.fixture
def no_settings_from_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_module, "DEFAULT_CONFIG_FILE", tmp_path / "absent.yaml")
    for name in list(os.environ):
        if name.startswith("EDGEBOX_"):
            monkeypatch.delenv(name)


# ------------------------------------------------------------------ --version


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"edgebox {__version__}\n"


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("usage: edgebox")
    assert "check" in out
    assert "serve" in out


# ------------------------------------------------------------------ check


def test_check_passes_a_good_repository(tmp_path: Path) -> None:
    add_add_sub(tmp_path)
    write_model(tmp_path, "pipeline", PIPELINE_CONFIG)

    result = run_edgebox("check", str(tmp_path))

    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.endswith(f"{tmp_path}: no problems found\n")


def test_check_lists_every_problem_with_its_file(tmp_path: Path) -> None:
    repo = tmp_path
    (repo / "a_no_config" / "1").mkdir(parents=True)
    (repo / "a_no_config" / "1" / "weights.bin").write_bytes(b"\0")
    build_add_sub(repo / "g_no_config_onnx" / "1" / "model.onnx")
    write_model(repo, "b_syntax", 'platform: "onnxruntime_onnx"\nmax_batch_size 8\n')
    write_model(
        repo, "c_graphdef", 'platform: "tensorflow_graphdef"\n', {"1/model.graphdef": b"\0"}
    )
    write_model(repo, "d_no_model_file", ADD_SUB_CONFIG.format(name="d_no_model_file"))
    (repo / "d_no_model_file" / "1").mkdir()
    wrong_dtype = ADD_SUB_CONFIG.format(name="e_wrong_dtype").replace(
        '"INPUT1" data_type: TYPE_FP32', '"INPUT1" data_type: TYPE_INT32'
    )
    build_add_sub(write_model(repo, "e_wrong_dtype", wrong_dtype) / "1" / "model.onnx")
    add_add_sub(repo, "f_good")

    result = run_edgebox("check", str(repo))

    assert result.returncode == EXIT_PROBLEMS
    assert result.stdout.splitlines() == [
        f"{repo}/a_no_config: no config.pbtxt, and no version folder holds a model file to "
        "tell the backend from (looked for 'model.onnx', 'model.plan', 'model.py')",
        f"{repo}/b_syntax/config.pbtxt:2:16: 'max_batch_size 8': Expected \":\".",
        f"{repo}/c_graphdef/config.pbtxt: backend 'tensorflow' is not supported by edgebox "
        "(supported: ensemble, onnxruntime, python, tensorrt)",
        f"{repo}/d_no_model_file/1: model 'd_no_model_file' version 1: model file "
        f"'{repo}/d_no_model_file/1/model.onnx' not found",
        f"{repo}/e_wrong_dtype/1: model 'e_wrong_dtype' version 1: "
        f"{repo}/e_wrong_dtype/config.pbtxt does not match {repo}/e_wrong_dtype/1/model.onnx: "
        "input 'INPUT1': config says TYPE_INT32, model has TYPE_FP32",
    ]
    assert result.stderr.endswith(f"5 problem(s) found in {repo}\n")


def test_check_reports_semantic_config_problems_and_missing_step_models(tmp_path: Path) -> None:
    write_model(tmp_path, "add_sub", ADD_SUB_CONFIG.format(name="other_name"))
    write_model(tmp_path, "pipeline", PIPELINE_CONFIG.replace('"add_sub"', '"adder"'))

    result = run_edgebox("check", str(tmp_path))

    assert result.returncode == EXIT_PROBLEMS
    assert result.stdout.splitlines() == [
        f"{tmp_path}/add_sub/config.pbtxt:1:1: model name 'other_name' does not match "
        "its folder 'add_sub'",
        f"{tmp_path}/pipeline/config.pbtxt: ensemble step model 'adder' is not in the repository",
    ]


def test_check_on_a_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nowhere")]) == EXIT_PROBLEMS
    captured = capsys.readouterr()
    assert captured.out == f"{tmp_path / 'nowhere'}: not a folder\n"


def test_check_on_an_empty_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path)]) == EXIT_PROBLEMS
    assert capsys.readouterr().out == f"{tmp_path}: no model folders\n"


def test_check_names_a_version_policy_without_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = add_add_sub(tmp_path)
    with open(model / "config.pbtxt", "a") as handle:
        handle.write("version_policy: { specific: { versions: [ 1, 4 ] } }\n")

    assert main(["check", str(tmp_path)]) == EXIT_PROBLEMS
    assert capsys.readouterr().out == (
        f"{model}/config.pbtxt: version_policy lists version 4, which has no folder\n"
    )


# ------------------------------------------------------------------ serve


def test_serve_with_a_bad_setting_file_exits_with_config_status(tmp_path: Path) -> None:
    config_file = tmp_path / "edgebox.yaml"
    config_file.write_text(f"model_repository: {tmp_path}\nmodel_control_mode: auto\n")

    result = run_edgebox("serve", "--config", str(config_file))

    assert result.returncode == EXIT_CONFIG == 78
    assert result.stdout == ""
    assert result.stderr == (
        f"edgebox: {config_file}:2: setting 'model_control_mode': must be one of none, poll, "
        "explicit, got 'auto'\n"
    )


def test_serve_with_a_bad_flag_exits_with_config_status(
    no_settings_from_the_host: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--http-port", "eighty"]) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        "edgebox: setting 'http_port' from --http-port: expected int, got 'eighty'\n"
    )


def test_serve_takes_the_metrics_port_flag(
    no_settings_from_the_host: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--metrics-port", "-1"]) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        "edgebox: setting 'metrics_port' (--metrics-port): must be 0..65535, got -1\n"
    )


def test_serve_has_a_flag_for_each_mqtt_setting(
    no_settings_from_the_host: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--mqtt-url", "mqtt://broker", "--mqtt-qos", "3"]) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        "edgebox: setting 'mqtt.qos' from --mqtt-qos: expected 0, 1 or 2, got 3\n"
    )
    assert main(["serve", "--mqtt-max-inflight", "0"]) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        "edgebox: setting 'mqtt.max_inflight' from --mqtt-max-inflight: expected 1..1000, got 0\n"
    )


def _serve_flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = commands.choices["serve"]
    return {option: action for action in serve._actions for option in action.option_strings}


def test_serve_has_a_flag_for_every_top_level_setting() -> None:
    flags = _serve_flags(build_parser())
    lists = {"streams"}  # a list of mappings: YAML or EDGEBOX_STREAMS only
    missing = []
    for field in dataclasses.fields(Settings):
        if field.name in SECTIONS or field.name in lists:
            continue
        action = flags.get("--" + field.name.replace("_", "-"))
        if action is None or action.dest != field.name or action.default != argparse.SUPPRESS:
            missing.append(field.name)
    assert missing == []


@dataclasses.dataclass(frozen=True)
class _NewSettings:
    frob_limit: int = 3
    """Most frobs at once. A second sentence the flag's help leaves out."""
    frob_safe: bool = True
    """Whether frobs are safe (as in 100%); false: they are not."""
    frob_mode: str = dataclasses.field(
        default="quick", metadata={"choices": ("quick", "slow"), "help": "quick or slow"}
    )
    """How frobs go; the help in the metadata wins over this one."""
    frob_file: Path | None = dataclasses.field(default=None, metadata={"metavar": "FILE"})
    """A file of frobs."""


def test_a_new_setting_gets_its_flag_from_its_field_alone() -> None:
    parser = argparse.ArgumentParser()
    add_setting_flags(parser, _NewSettings)
    flags = {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"}
    assert [a.option_strings for a in flags.values()] == [
        ["--frob-limit"],
        ["--frob-safe"],
        ["--frob-mode"],
        ["--frob-file"],
    ]
    assert flags["frob_limit"].help == "Most frobs at once. (default: 3)"
    assert (
        flags["frob_safe"].help
        == "Whether frobs are safe (as in 100%%); false: they are not. (default: true)"
    )
    assert flags["frob_mode"].help == "quick or slow (default: quick)"
    assert flags["frob_mode"].choices == ("quick", "slow")
    assert flags["frob_file"].metavar == "FILE"
    assert flags["frob_file"].help == "A file of frobs. (default: none)"
    # Values stay text, read by load_settings, so a bad one is a settings problem (exit 78).
    args = parser.parse_args(["--frob-limit", "x", "--frob-safe", "no", "--frob-mode", "slow"])
    assert vars(args) == {"frob_limit": "x", "frob_safe": "no", "frob_mode": "slow"}
    parser.format_help()


def test_serve_takes_a_bool_setting_as_true_or_false_text(
    no_settings_from_the_host: None,
) -> None:
    args = build_parser().parse_args(
        ["serve", "--allow-metrics", "false", "--strict-readiness", "yes"]
    )
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "config")}
    assert flags == {"allow_metrics": "false", "strict_readiness": "yes"}
    settings = load_settings(flags)
    assert (settings.allow_metrics, settings.strict_readiness) == (False, True)
    assert settings.sources["allow_metrics"] == "--allow-metrics"


def test_serve_help_comes_from_each_setting_docstring(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "HTTP port (KServe v2); 0 picks a free port and logs it. (default: 8000)" in help_text
    assert "--model-control-mode {none,poll,explicit}" in help_text


def test_serve_help_names_the_default_an_empty_setting_stands_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "mqtt.device_id (default: the hostname and 8 hex digits unique to the machine)" in (
        help_text
    )
    assert "mqtt.spool_path (default: /var/lib/edgebox/mqtt/spool.sqlite)" in help_text
    assert "mqtt.client_id (default: edgebox-DEVICE_ID)" in help_text
    assert "(default: empty)" in help_text


def test_serve_with_a_bad_environment_variable_exits_with_config_status(
    no_settings_from_the_host: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("EDGEBOX_MODEL_REPOSITRY", "/srv/models")
    assert main(["serve"]) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        "edgebox: unknown setting 'EDGEBOX_MODEL_REPOSITRY'; did you mean 'model_repository'?\n"
    )


def test_serve_without_the_repository_folder_exits_with_config_status(
    tmp_path: Path, no_settings_from_the_host: None, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "models"
    assert main(["serve", "--model-repository", str(missing)]) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        f"edgebox: setting 'model_repository' (--model-repository): '{missing}' is not a folder\n"
    )


# ------------------------------------------------------------------ publish


def test_publish_prints_the_published_version(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    add_add_sub(repo)
    source = build_add_sub(tmp_path / "build" / "model.onnx")

    result = run_edgebox("publish", str(source), "--model", "add_sub", "--repository", str(repo))

    assert (result.returncode, result.stderr) == (EXIT_OK, "")
    assert result.stdout == f"published model 'add_sub' version 2 to {repo}/add_sub/2\n"
    assert (repo / "add_sub" / "2" / "model.onnx").read_bytes() == source.read_bytes()


def test_publish_installs_the_config_of_a_new_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    source = build_add_sub(tmp_path / "build" / "model.onnx")
    config = tmp_path / "build" / "config.pbtxt"
    config.write_text(ADD_SUB_CONFIG.format(name="adder"))

    code = main(
        ["publish", str(source), "--model", "adder", "--version", "3",
         "--repository", str(repo), "--config", str(config)]
    )  # fmt: skip

    assert code == EXIT_OK
    assert capsys.readouterr() == (f"published model 'adder' version 3 to {repo}/adder/3\n", "")
    assert sorted(os.listdir(repo / "adder")) == ["3", "config.pbtxt"]
    assert (repo / "adder" / "config.pbtxt").read_text() == config.read_text()


def test_publish_refuses_an_existing_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = add_add_sub(tmp_path)
    before = (model / "1" / "model.onnx").read_bytes()
    source = tmp_path / "model.onnx"
    source.write_bytes(b"another model")

    code = main(
        ["publish", str(source), "--model", "add_sub", "--version", "1",
         "--repository", str(tmp_path)]
    )  # fmt: skip

    assert code == EXIT_PROBLEMS
    assert capsys.readouterr() == (
        "",
        f"edgebox: model 'add_sub' version 1: '{model}/1' already exists; "
        "versions are never overwritten, publish a new version number\n",
    )
    assert (model / "1" / "model.onnx").read_bytes() == before
    assert sorted(os.listdir(model)) == ["1", "config.pbtxt"]


@pytest.mark.parametrize("version", ["0", "01", "latest"])
def test_publish_names_the_version_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    add_add_sub(tmp_path)
    source = build_add_sub(tmp_path / "build" / "model.onnx")

    code = main(
        ["publish", str(source), "--model", "add_sub", "--version", version,
         "--repository", str(tmp_path)]
    )  # fmt: skip

    assert code == EXIT_PROBLEMS
    assert capsys.readouterr().err == (
        f"edgebox: version '{version}': a version folder is named with a positive integer "
        "without a leading zero\n"
    )


def test_publish_lists_config_problems_with_their_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    source = build_add_sub(tmp_path / "build" / "model.onnx")
    config = tmp_path / "build" / "config.pbtxt"
    config.write_text('platform: "onnxruntime_onnx"\nmax_batch_size 8\n')

    code = main(
        ["publish", str(source), "--model", "add_sub", "--repository", str(repo),
         "--config", str(config)]
    )  # fmt: skip

    assert code == EXIT_PROBLEMS
    assert capsys.readouterr() == (
        "",
        f"{config}:2:16: 'max_batch_size 8': Expected \":\".\n"
        f"edgebox: model 'add_sub': config '{config}' has 1 problem(s); nothing published\n",
    )
    assert os.listdir(repo) == []


def test_publish_without_a_config_for_a_new_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = build_add_sub(tmp_path / "build" / "model.onnx")
    repo = tmp_path / "repo"
    repo.mkdir()

    code = main(["publish", str(source), "--model", "add_sub", "--repository", str(repo)])

    assert code == EXIT_PROBLEMS
    assert capsys.readouterr().err == (
        f"edgebox: model 'add_sub' has no config.pbtxt in {repo}; pass --config FILE\n"
    )
    assert os.listdir(repo) == []


def test_publish_requires_the_model_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["publish", str(tmp_path / "model.onnx"), "--repository", str(tmp_path)])

    assert info.value.code == 2
    assert "the following arguments are required: --model" in capsys.readouterr().err


# ------------------------------------------------------------------ check --config

THREE_SECTIONS_WRONG = """\
http_port: 8000
mqtt:
  url: mqtt://broker.local
  qso: 1
streams:
  - name: cam
    fps: 10
telemetry:
  interval_s: 0
"""
"""Three problems in three sections: an unknown key (line 4), a stream with
no source (its entry starts on line 6), an impossible interval (line 9)."""


def three_problem_lines(config_file: Path) -> list[str]:
    return [
        f"{config_file}:4: setting 'mqtt': unknown key 'qso'; did you mean 'qos'?",
        f"{config_file}:6: setting 'streams[0]': missing required key 'source'",
        f"{config_file}:9: setting 'telemetry.interval_s': expected 0.1..60 seconds, got 0.0",
    ]


def test_check_config_lists_every_problem_with_its_file_and_line(tmp_path: Path) -> None:
    config_file = tmp_path / "edgebox.yaml"
    config_file.write_text(THREE_SECTIONS_WRONG)

    result = run_edgebox("check", "--config", str(config_file))

    assert result.returncode == EXIT_CONFIG
    assert result.stdout.splitlines() == three_problem_lines(config_file)
    assert result.stderr == f"3 problem(s) found in {config_file}\n"


def test_check_config_names_top_level_problems_with_their_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = tmp_path / "edgebox.yaml"
    config_file.write_text(
        "http_port: 70000\nrepository_poll_secs: -1\nmodel_repo: /srv\ndashboard:\n  port: -5\n"
    )

    assert main(["check", "--config", str(config_file)]) == EXIT_CONFIG
    assert capsys.readouterr().out.splitlines() == [
        f"{config_file}:1: setting 'http_port': must be 0..65535, got 70000",
        f"{config_file}:2: setting 'repository_poll_secs': must be > 0, got -1.0",
        f"{config_file}:3: unknown setting 'model_repo'; did you mean 'model_repository'?",
        f"{config_file}:5: setting 'dashboard.port': expected 0..65535 (0: any free port), got -5",
    ]


def test_check_config_passes_the_shipped_file() -> None:
    result = run_edgebox("check", "--config", "etc/edgebox.yaml")

    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    assert result.stdout == (
        "etc/edgebox.yaml: ok (repository /var/lib/edgebox/models in poll mode; "
        "ports http 8000, grpc 8001, metrics 8002, dashboard 8080; mqtt off; 0 streams; "
        "telemetry every 1.0 s)\n"
    )


def test_check_config_judges_the_file_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = tmp_path / "edgebox.yaml"
    config_file.write_text("http_port: 8100\n")
    monkeypatch.setenv("EDGEBOX_HTTP_PORT", "eighty")
    monkeypatch.setenv("EDGEBOX_NO_SUCH_SETTING", "1")

    assert main(["check", "--config", str(config_file)]) == EXIT_OK
    assert capsys.readouterr().out.startswith(f"{config_file}: ok (")


def test_check_help_says_the_environment_is_not_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "EDGEBOX_* variables are not read" in " ".join(capsys.readouterr().out.split())


def test_check_config_binds_nothing_while_its_ports_are_taken(tmp_path: Path) -> None:
    taken = []
    try:
        for _ in range(4):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            taken.append(sock)
        http, grpc, metrics, dashboard = (sock.getsockname()[1] for sock in taken)
        config_file = tmp_path / "edgebox.yaml"
        config_file.write_text(
            f"host: 127.0.0.1\nhttp_port: {http}\ngrpc_port: {grpc}\nmetrics_port: {metrics}\n"
            f"dashboard:\n  port: {dashboard}\n"
        )

        result = run_edgebox("check", "--config", str(config_file))
    finally:
        for sock in taken:
            sock.close()

    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    assert result.stdout.startswith(f"{config_file}: ok (")


def test_check_config_opens_no_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("check --config opened a socket")

    config_file = tmp_path / "edgebox.yaml"
    config_file.write_text("mqtt:\n  url: mqtt://127.0.0.1:1\n")
    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)

    assert main(["check", "--config", str(config_file)]) == EXIT_OK
    assert "mqtt mqtt://127.0.0.1:1" in capsys.readouterr().out


def test_check_config_and_repository_checks_both(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    add_add_sub(repo)
    bad_config = tmp_path / "bad.yaml"
    bad_config.write_text(THREE_SECTIONS_WRONG)
    good_config = tmp_path / "good.yaml"
    good_config.write_text("http_port: 8100\n")
    write_model(repo, "broken", 'name: "broken"\nplatform: "onnxruntime_onnx"\ninput [\n')

    bad = run_edgebox("check", "--config", str(bad_config), str(repo))
    good = run_edgebox("check", "--config", str(good_config), str(repo))

    assert bad.returncode == EXIT_CONFIG
    assert bad.stdout.splitlines()[:3] == three_problem_lines(bad_config)
    assert "broken" in bad.stdout.splitlines()[3]
    assert good.returncode == EXIT_PROBLEMS
    assert good.stdout.splitlines()[0].startswith(f"{good_config}: ok (")
    assert "broken" in good.stdout.splitlines()[1]


def test_check_without_a_repository_or_config_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check"])
    assert info.value.code == 2
    assert "give a REPOSITORY, --config FILE or both" in capsys.readouterr().err


def test_serve_with_the_same_bad_file_names_every_problem(tmp_path: Path) -> None:
    config_file = tmp_path / "edgebox.yaml"
    config_file.write_text(f"model_repository: {tmp_path}\n" + THREE_SECTIONS_WRONG)

    result = run_edgebox("serve", "--config", str(config_file))

    assert result.returncode == EXIT_CONFIG
    assert result.stdout == ""
    shifted = [
        line.replace(f"{config_file}:{n}:", f"{config_file}:{n + 1}:")
        for line, n in zip(three_problem_lines(config_file), (4, 6, 9), strict=True)
    ]
    assert result.stderr.splitlines() == [f"edgebox: {line}" for line in shifted]
