"""Daemon settings: defaults < YAML file < ``EDGEBOX_*`` environment < flags.

Every bad value stops startup with the setting's name and where it came from.
Tests never read the real ``/etc/edgebox/edgebox.yaml`` or the real
environment: the default file is pointed into ``tmp_path`` and ``environ`` is
passed explicitly.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from edgebox.mqtt.settings import MqttSettings
from edgebox.settings import Settings, SettingsError, load_settings
from edgebox.settings import loader as settings_module
from field_docstrings import documented_fields


@pytest.fixture(autouse=True)
def no_default_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "etc" / "edgebox.yaml"
    monkeypatch.setattr(settings_module, "DEFAULT_CONFIG_FILE", path)
    return path


def yaml_file(tmp_path: Path, text: str, name: str = "edgebox.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def settings_error(**kwargs) -> str:
    kwargs.setdefault("flags", {})
    kwargs.setdefault("environ", {})
    with pytest.raises(SettingsError) as info:
        load_settings(**kwargs)
    return str(info.value)


# ------------------------------------------------------------------ layers


def test_defaults_apply_without_file_env_or_flags() -> None:
    loaded = load_settings({}, environ={})
    assert loaded == Settings()
    assert loaded.sources == {}


def test_default_file_is_read_when_present(no_default_file: Path) -> None:
    no_default_file.parent.mkdir()
    no_default_file.write_text("http_port: 9000\n")
    loaded = load_settings({}, environ={})
    assert loaded.http_port == 9000
    assert loaded.sources == {"http_port": str(no_default_file)}


def test_each_layer_overrides_the_one_before(tmp_path: Path) -> None:
    config_file = yaml_file(
        tmp_path,
        "http_port: 8001\nhost: 127.0.0.1\nlog_verbose: 1\nrepository_poll_secs: 3\n",
    )
    loaded = load_settings(
        {"http_port": "8003"},
        config_file=config_file,
        environ={
            "EDGEBOX_HTTP_PORT": "8002",
            "EDGEBOX_REPOSITORY_POLL_SECS": "0.5",
            "PATH": "/usr/bin",
        },
    )
    assert loaded.http_port == 8003
    assert loaded.repository_poll_secs == 0.5
    assert loaded.host == "127.0.0.1"
    assert loaded.log_verbose == 1
    assert loaded.exit_timeout_secs == Settings().exit_timeout_secs
    assert loaded.sources == {
        "http_port": "--http-port",
        "repository_poll_secs": "EDGEBOX_REPOSITORY_POLL_SECS",
        "host": str(config_file),
        "log_verbose": str(config_file),
    }


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "model_repository: /srv/models\n")
    loaded = load_settings(
        {}, config_file=config_file, environ={"EDGEBOX_MODEL_REPOSITORY": "/data/models"}
    )
    assert loaded.model_repository == Path("/data/models")
    assert loaded.sources == {"model_repository": "EDGEBOX_MODEL_REPOSITORY"}


def test_values_are_converted_to_each_settings_type(tmp_path: Path) -> None:
    config_file = yaml_file(
        tmp_path,
        "model_control_mode: explicit\n"
        "load_model: [add_sub, lane]\n"
        "strict_readiness: yes\n"
        "exit_timeout_secs: 5\n",
    )
    loaded = load_settings(
        {"max_request_bytes": "1024"},
        config_file=config_file,
        environ={"EDGEBOX_HTTP_MAX_CONNECTIONS": " 16 "},
    )
    assert loaded.load_model == ("add_sub", "lane")
    assert loaded.strict_readiness is True
    assert loaded.exit_timeout_secs == 5.0
    assert loaded.max_request_bytes == 1024
    assert loaded.http_max_connections == 16


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", True), ("true", True), ("ON", True), ("no", False), ("0", False), ("off", False)],
)
def test_boolean_words_from_the_environment(text: str, expected: bool) -> None:
    loaded = load_settings({}, environ={"EDGEBOX_STRICT_READINESS": text})
    assert loaded.strict_readiness is expected


def test_load_model_list_from_the_environment_and_flags() -> None:
    from_env = load_settings(
        {},
        environ={"EDGEBOX_MODEL_CONTROL_MODE": "explicit", "EDGEBOX_LOAD_MODEL": "add_sub, lane"},
    )
    assert from_env.load_model == ("add_sub", "lane")
    from_flags = load_settings({"model_control_mode": "explicit", "load_model": ["*"]}, environ={})
    assert from_flags.load_model == ("*",)


def test_settings_are_frozen() -> None:
    loaded = load_settings({}, environ={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.http_port = 1  # type: ignore[misc]


def test_every_setting_has_a_docstring() -> None:
    documented = documented_fields(Settings)
    assert documented == {field.name for field in dataclasses.fields(Settings)}


# ------------------------------------------------------------------ unknown keys


def test_unknown_yaml_key_suggests_the_likely_one(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "model_repo: /srv/models\n")
    assert settings_error(config_file=config_file) == (
        f"{config_file}: unknown setting 'model_repo'; did you mean 'model_repository'?"
    )


def test_dashed_yaml_key_suggests_the_underscored_one(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "http-port: 8000\n")
    assert settings_error(config_file=config_file) == (
        f"{config_file}: unknown setting 'http-port'; did you mean 'http_port'?"
    )


def test_unknown_yaml_key_without_a_close_match(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "flavour: blue\n")
    assert settings_error(config_file=config_file) == f"{config_file}: unknown setting 'flavour'"


def test_unknown_environment_variable_is_refused() -> None:
    assert settings_error(environ={"EDGEBOX_HTTP_PROT": "8000"}) == (
        "unknown setting 'EDGEBOX_HTTP_PROT'; did you mean 'http_port'?"
    )


# ------------------------------------------------------------------ bad values


def test_bad_environment_value_names_setting_and_variable() -> None:
    assert settings_error(environ={"EDGEBOX_HTTP_PORT": "eighty"}) == (
        "setting 'http_port' from EDGEBOX_HTTP_PORT: expected int, got 'eighty'"
    )


def test_bad_yaml_value_names_setting_and_file(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "strict_readiness: maybe\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'strict_readiness' from {config_file}: expected bool, got 'maybe'"
    )


def test_bad_flag_value_names_setting_and_flag() -> None:
    assert settings_error(flags={"exit_timeout_secs": "soon"}) == (
        "setting 'exit_timeout_secs' from --exit-timeout-secs: expected float, got 'soon'"
    )


def test_fractional_port_is_not_truncated(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "http_port: 8000.5\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'http_port' from {config_file}: expected int, got 8000.5"
    )


@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_non_finite_seconds_are_refused(text: str) -> None:
    assert settings_error(environ={"EDGEBOX_REPOSITORY_POLL_SECS": text}) == (
        f"setting 'repository_poll_secs' from EDGEBOX_REPOSITORY_POLL_SECS: "
        f"expected float, got '{text}'"
    )


def test_empty_yaml_value_is_not_the_text_none(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "model_repository:\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'model_repository' from {config_file}: expected Path, got None"
    )


def test_yaml_null_clears_an_optional_setting(tmp_path: Path) -> None:
    config_file = tmp_path / "edgebox.yaml"
    config_file.write_text("api_key_file: null\n")
    assert load_settings({}, config_file=config_file, environ={}).api_key_file is None


def test_list_for_a_single_value_is_refused(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "host: [127.0.0.1, 10.0.0.1]\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'host' from {config_file}: expected str, got ['127.0.0.1', '10.0.0.1']"
    )


def test_out_of_range_port_names_its_source() -> None:
    assert settings_error(flags={"http_port": "70000"}) == (
        "setting 'http_port' (--http-port): must be 0..65535, got 70000"
    )


def test_grpc_settings_default_to_triton_port_and_http_like_limits() -> None:
    loaded = load_settings({}, environ={})
    assert (loaded.grpc_port, loaded.grpc_thread_count) == (8001, 32)
    assert loaded.grpc_max_concurrent_streams == 128


def test_out_of_range_grpc_port_names_its_source() -> None:
    assert settings_error(environ={"EDGEBOX_GRPC_PORT": "-1"}) == (
        "setting 'grpc_port' (EDGEBOX_GRPC_PORT): must be 0..65535, got -1"
    )


def test_metrics_port_defaults_to_tritons_and_is_range_checked() -> None:
    assert load_settings({}, environ={}).metrics_port == 8002
    assert load_settings({"metrics_port": "0"}, environ={}).metrics_port == 0
    assert settings_error(environ={"EDGEBOX_METRICS_PORT": "65536"}) == (
        "setting 'metrics_port' (EDGEBOX_METRICS_PORT): must be 0..65535, got 65536"
    )


def test_grpc_port_equal_to_http_port_is_refused() -> None:
    assert settings_error(flags={"http_port": "9000", "grpc_port": "9000"}) == (
        "setting 'grpc_port' (--grpc-port): must differ from http_port, both are 9000"
    )
    assert load_settings({"http_port": "0", "grpc_port": "0"}, environ={}).grpc_port == 0


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("grpc_thread_count", "0", "must be 1..1024, got 0"),
        ("grpc_thread_count", "1025", "must be 1..1024, got 1025"),
        ("grpc_max_concurrent_streams", "0", "must be >= 1, got 0"),
        ("grpc_max_streams", "0", "must be 1..4096, got 0"),
        ("grpc_max_streams_per_client", "0", "must be >= 1, got 0"),
    ],
)
def test_grpc_limits_out_of_range_are_refused(key: str, value: str, expected: str) -> None:
    flag = "--" + key.replace("_", "-")
    assert settings_error(flags={key: value}) == f"setting '{key}' ({flag}): {expected}"


def test_shared_memory_limits_default_and_refuse_negatives() -> None:
    loaded = load_settings({}, environ={})
    assert (loaded.shared_memory_max_bytes, loaded.shared_memory_max_regions) == (1 << 30, 64)
    assert settings_error(flags={"shared_memory_max_bytes": "-1"}) == (
        "setting 'shared_memory_max_bytes' (--shared-memory-max-bytes): must be >= 0, got -1"
    )
    assert settings_error(environ={"EDGEBOX_SHARED_MEMORY_MAX_REGIONS": "-2"}) == (
        "setting 'shared_memory_max_regions' (EDGEBOX_SHARED_MEMORY_MAX_REGIONS): "
        "must be >= 0, got -2"
    )


def test_unknown_control_mode_lists_the_choices(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "model_control_mode: auto\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'model_control_mode' ({config_file}): must be one of none, poll, explicit, "
        "got 'auto'"
    )


def test_unknown_python_isolation_lists_the_choices() -> None:
    assert settings_error(environ={"EDGEBOX_PYTHON_ISOLATION": "subprocess"}) == (
        "setting 'python_isolation' (EDGEBOX_PYTHON_ISOLATION): must be one of in_process, "
        "process, got 'subprocess'"
    )


def test_negative_python_memory_limit_is_refused() -> None:
    assert settings_error(flags={"python_memory_limit_mb": "-1"}) == (
        "setting 'python_memory_limit_mb' (--python-memory-limit-mb): must be >= 0, got -1"
    )


def test_body_budget_below_the_largest_request_is_refused() -> None:
    assert settings_error(
        flags={"max_request_bytes": "1000", "http_max_body_bytes_in_flight": "999"}
    ) == (
        "setting 'http_max_body_bytes_in_flight' (--http-max-body-bytes-in-flight): must be 0 "
        "or at least max_request_bytes (1000), got 999"
    )


def test_zero_poll_interval_is_refused() -> None:
    assert settings_error(environ={"EDGEBOX_REPOSITORY_POLL_SECS": "0"}) == (
        "setting 'repository_poll_secs' (EDGEBOX_REPOSITORY_POLL_SECS): must be > 0, got 0.0"
    )


def test_load_limits_default_to_sane_caps() -> None:
    loaded = load_settings({}, environ={})
    assert (loaded.max_warmup_requests, loaded.max_instances_per_model) == (1000, 16)
    assert loaded.max_instances_total == 64
    assert loaded.max_threads_per_instance == 0  # the CPU cores, resolved by the daemon


def test_negative_thread_cap_is_refused() -> None:
    assert settings_error(environ={"EDGEBOX_MAX_THREADS_PER_INSTANCE": "-1"}) == (
        "setting 'max_threads_per_instance' (EDGEBOX_MAX_THREADS_PER_INSTANCE): must be >= 0 "
        "(0: the CPU cores), got -1"
    )


@pytest.mark.parametrize(
    "key",
    [
        "max_warmup_requests",
        "max_instances_per_model",
        "max_instances_total",
    ],
)
def test_load_limits_below_one_are_refused(key: str) -> None:
    assert settings_error(environ={f"EDGEBOX_{key.upper()}": "0"}) == (
        f"setting '{key}' (EDGEBOX_{key.upper()}): must be >= 1, got 0"
    )


def test_per_model_instances_cannot_exceed_the_total() -> None:
    assert settings_error(flags={"max_instances_per_model": "65"}) == (
        "setting 'max_instances_per_model' (--max-instances-per-model): must be <= "
        "max_instances_total (64), got 65"
    )


@pytest.mark.parametrize("mode", ["none", "poll"])
def test_load_model_outside_explicit_mode_is_refused(mode: str) -> None:
    assert settings_error(flags={"model_control_mode": mode, "load_model": ["add_sub"]}) == (
        "setting 'load_model' (--load-model): only applies with model_control_mode explicit"
    )


# ------------------------------------------------------------------ the file itself


def test_invalid_yaml_is_located(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "http_port: 8000\nhost: [127.0.0.1\n")
    assert settings_error(config_file=config_file) == (
        f"{config_file}:3:1: not valid YAML: expected ',' or ']', but got '<stream end>'"
    )


def test_yaml_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "- http_port: 8000\n")
    assert settings_error(config_file=config_file) == (
        f"{config_file}: the top level must be a mapping of setting: value"
    )


def test_empty_yaml_file_keeps_the_defaults(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "# nothing set yet\n")
    assert load_settings({}, config_file=config_file, environ={}) == Settings()


def test_missing_explicit_config_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert settings_error(config_file=missing) == (
        f"cannot read configuration file '{missing}': No such file or directory"
    )


# ------------------------------------------------------------------ access control


def test_restricted_api_groups_from_flags_yaml_and_environment(tmp_path: Path) -> None:
    groups = ("model-repository,statistics:admin-key=secret", "trace:t=a,b")
    from_flags = load_settings({"http_restricted_api": list(groups)}, environ={})
    assert from_flags.http_restricted_api == groups
    config_file = yaml_file(
        tmp_path,
        "http_restricted_api: ['model-repository,statistics:admin-key=secret', 'trace:t=a,b']\n"
        "grpc_restricted_protocol: 'health,metadata:k=v'\n",
    )
    from_yaml = load_settings({}, config_file=config_file, environ={})
    assert from_yaml.http_restricted_api == groups
    assert from_yaml.grpc_restricted_protocol == ("health,metadata:k=v",)
    # In the environment, groups are separated by whitespace: they hold commas.
    from_env = load_settings({}, environ={"EDGEBOX_HTTP_RESTRICTED_API": " ".join(groups) + "\n"})
    assert from_env.http_restricted_api == groups


def test_bad_restricted_api_group_names_setting_and_flag() -> None:
    assert settings_error(flags={"http_restricted_api": ["inference:k=v", "bogus:a=1"]}) == (
        "setting 'http_restricted_api' from --http-restricted-api: unknown API 'bogus' in "
        "'bogus:a=1'; expected one of model-repository, shared-memory, statistics, trace, "
        "logging, model-config, health, metadata, inference"
    )


def test_grpc_restricted_protocol_is_validated_now(tmp_path: Path) -> None:
    assert settings_error(
        environ={"EDGEBOX_GRPC_RESTRICTED_PROTOCOL": "health:a=1 health,metadata:b=2"}
    ) == (
        "setting 'grpc_restricted_protocol' from EDGEBOX_GRPC_RESTRICTED_PROTOCOL: "
        "API 'health' is in more than one group; each API takes one header"
    )
    config_file = yaml_file(tmp_path, "grpc_restricted_protocol: [7]\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'grpc_restricted_protocol' from {config_file}: expected "
        "'<API>[,<API>...]:<header>=<value>', got '7'"
    )


def test_api_key_file_is_checked_at_startup(tmp_path: Path) -> None:
    key_file = tmp_path / "api.key"
    key_file.write_text("k" * 32 + "\n")
    key_file.chmod(0o600)
    loaded = load_settings({}, environ={"EDGEBOX_API_KEY_FILE": str(key_file)})
    assert loaded.api_key_file == key_file
    assert Settings().api_key_file is None
    key_file.chmod(0o644)
    assert settings_error(flags={"api_key_file": str(key_file)}) == (
        f"setting 'api_key_file' (--api-key-file): '{key_file}' can be read by every user "
        f"(mode 0644); run: chmod 600 '{key_file}' (or 640 with the daemon's group)"
    )


# ------------------------------------------------------------------ sections (mqtt)


def test_absent_mqtt_section_means_no_mqtt() -> None:
    assert load_settings({}, environ={}).mqtt is None
    assert Settings().mqtt is None


@pytest.mark.parametrize("text", ["mqtt:\n", "mqtt: {}\n"])
def test_empty_mqtt_section_turns_mqtt_on_with_the_defaults(tmp_path: Path, text: str) -> None:
    config_file = yaml_file(tmp_path, text)
    assert load_settings({}, config_file=config_file, environ={}).mqtt == MqttSettings()


def test_mqtt_section_from_yaml_fills_the_other_fields_with_defaults(tmp_path: Path) -> None:
    config_file = yaml_file(
        tmp_path,
        "log_verbose: 1\nmqtt:\n  url: mqtts://broker.lan\n  qos: 0\n  protocol: 3.1.1\n",
    )
    loaded = load_settings({}, config_file=config_file, environ={})
    assert loaded.mqtt == MqttSettings(url="mqtts://broker.lan", qos=0, protocol="3.1.1")
    assert loaded.sources == {
        "log_verbose": str(config_file),
        "mqtt.url": str(config_file),
        "mqtt.qos": str(config_file),
        "mqtt.protocol": str(config_file),
    }


def test_environment_and_flags_override_one_mqtt_field_each(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "mqtt:\n  url: mqtt://broker\n  qos: 2\n  keepalive: 60\n")
    loaded = load_settings(
        {"mqtt_keepalive": "10"},
        config_file=config_file,
        environ={"EDGEBOX_MQTT_QOS": "0", "EDGEBOX_MQTT_KEEPALIVE": "20"},
    )
    assert loaded.mqtt == MqttSettings(url="mqtt://broker", qos=0, keepalive=10)
    assert loaded.sources == {
        "mqtt.url": str(config_file),
        "mqtt.qos": "EDGEBOX_MQTT_QOS",
        "mqtt.keepalive": "--mqtt-keepalive",
    }


def test_one_mqtt_variable_or_flag_turns_mqtt_on(tmp_path: Path) -> None:
    spool = tmp_path / "spool.sqlite"
    from_env = load_settings({}, environ={"EDGEBOX_MQTT_SPOOL_PATH": str(spool)})
    assert from_env.mqtt == MqttSettings(spool_path=spool)
    from_flag = load_settings({"mqtt_url": "ws://broker:8080/mqtt"}, environ={})
    assert from_flag.mqtt == MqttSettings(url="ws://broker:8080/mqtt")


def test_mqtt_section_as_yaml_text_in_the_environment() -> None:
    loaded = load_settings({}, environ={"EDGEBOX_MQTT": "{url: 'mqtt://broker', qos: 0}"})
    assert loaded.mqtt == MqttSettings(url="mqtt://broker", qos=0)


def test_unknown_mqtt_key_suggests_the_likely_one_with_its_line(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "http_port: 8000\nmqtt:\n  url: mqtt://broker\n  qso: 0\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'mqtt' from {config_file}:2: unknown key 'qso'; did you mean 'qos'?"
    )


def test_unknown_mqtt_variable_suggests_the_likely_setting() -> None:
    assert settings_error(environ={"EDGEBOX_MQTT_QSO": "0"}) == (
        "unknown setting 'EDGEBOX_MQTT_QSO'; did you mean 'mqtt.qos'?"
    )


def test_bad_mqtt_value_names_the_key_file_and_line(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "mqtt:\n  url: mqtt://broker\n\n  qos: 3\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'mqtt.qos' from {config_file}:4: expected 0, 1 or 2, got 3"
    )


def test_mqtt_value_of_the_wrong_type_names_the_key_file_and_line(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "mqtt:\n  keepalive: often\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'mqtt.keepalive' from {config_file}:2: expected int, got 'often'"
    )


def test_bad_mqtt_variable_and_flag_name_themselves() -> None:
    assert settings_error(environ={"EDGEBOX_MQTT_QOS": "3"}) == (
        "setting 'mqtt.qos' from EDGEBOX_MQTT_QOS: expected 0, 1 or 2, got 3"
    )
    assert settings_error(flags={"mqtt_url": "http://broker"}) == (
        "setting 'mqtt.url' from --mqtt-url: expected mqtt://HOST[:PORT], mqtts://, ws:// or "
        "wss://, got 'http://broker'"
    )


def test_mqtt_section_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    config_file = yaml_file(tmp_path, "mqtt: [mqtt://broker]\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'mqtt' from {config_file}:1: expected a mapping of mqtt settings, "
        "got ['mqtt://broker']"
    )


def test_unreadable_mqtt_password_file_stops_startup(tmp_path: Path) -> None:
    missing = tmp_path / "mqtt.password"
    config_file = yaml_file(tmp_path, f"mqtt:\n  username: edgebox\n  password_file: {missing}\n")
    assert settings_error(config_file=config_file) == (
        f"setting 'mqtt.password_file' from {config_file}:3: cannot read '{missing}': "
        "No such file or directory"
    )


def test_mqtt_password_never_appears_in_errors_or_repr(tmp_path: Path) -> None:
    secret = "s3cret-Pa55word"
    password_file = tmp_path / "mqtt.password"
    password_file.write_text(f"{secret}\n{secret}\n")
    message = settings_error(
        environ={
            "EDGEBOX_MQTT_USERNAME": "edgebox",
            "EDGEBOX_MQTT_PASSWORD_FILE": str(password_file),
        }
    )
    assert message == (
        f"setting 'mqtt.password_file' from EDGEBOX_MQTT_PASSWORD_FILE: '{password_file}' holds "
        "2 lines; expected the password on one line"
    )
    password_file.write_text(f"{secret}\n")
    loaded = load_settings(
        {"mqtt_username": "edgebox", "mqtt_password_file": str(password_file)}, environ={}
    )
    assert loaded.mqtt is not None and loaded.mqtt.password() == secret
    assert secret not in repr(loaded)
    assert secret not in settings_error(
        flags={"mqtt_password_file": str(password_file), "mqtt_url": f"mqtt://u:{secret}@h"}
    )


def test_cross_field_mqtt_problem_names_the_source_of_the_field() -> None:
    assert settings_error(environ={"EDGEBOX_MQTT_KEY_FILE": "/dev/null"}) == (
        "setting 'mqtt.key_file' from EDGEBOX_MQTT_KEY_FILE: needs an mqtts:// or wss:// url, "
        "got mqtt://\n"
        "setting 'mqtt.key_file' from EDGEBOX_MQTT_KEY_FILE: needs cert_file too "
        "(a client certificate goes with its key)"
    )


def test_server_name_defaults_to_edgebox_and_is_set_by_each_layer(no_default_file) -> None:
    from edgebox.cli import build_parser

    assert Settings().server_name == "edgebox"
    assert load_settings({}, environ={"EDGEBOX_SERVER_NAME": "triton"}).server_name == "triton"
    args = vars(build_parser().parse_args(["serve", "--server-name", "triton"]))
    assert args["server_name"] == "triton"
    assert load_settings({"server_name": "triton"}, environ={}).server_name == "triton"


def test_empty_server_name_is_refused(no_default_file) -> None:
    assert settings_error(flags={"server_name": ""}) == (
        "setting 'server_name' (--server-name): must not be empty"
    )


# ------------------------------------------------------------------ every problem at once


def test_every_problem_is_collected_each_with_its_line(tmp_path: Path) -> None:
    config_file = yaml_file(
        tmp_path,
        "http_port: -1\n"
        "flavour: blue\n"
        "streams:\n"
        "  - name: cam\n"
        "    source: synthetic:road\n"
        "    fps: -2\n"
        "    queue_frames: 0\n"
        "mqtt:\n"
        "  url: mqtts://broker.local\n"
        f"  ca_file: {tmp_path / 'missing.pem'}\n"
        "  qos: 3\n",
    )
    with pytest.raises(SettingsError) as info:
        load_settings({}, config_file=config_file, environ={})

    assert [problem.located() for problem in info.value.problems] == [
        f"{config_file}:1: setting 'http_port': must be 0..65535, got -1",
        f"{config_file}:2: unknown setting 'flavour'",
        f"{config_file}:6: setting 'streams[0].fps': expected a number >= 0 (0: no cap), got -2",
        f"{config_file}:7: setting 'streams[0].queue_frames': expected an integer 1..64, got 0",
        f"{config_file}:10: setting 'mqtt.ca_file': cannot read '{tmp_path / 'missing.pem'}': "
        "No such file or directory",
        f"{config_file}:11: setting 'mqtt.qos': expected 0, 1 or 2, got 3",
    ]
    assert str(info.value) == "\n".join(problem.message for problem in info.value.problems)


def test_a_value_that_failed_is_not_judged_again_with_its_default(tmp_path: Path) -> None:
    config_file = yaml_file(
        tmp_path, "http_port: eighty\nmax_instances_total: 0\ndashboard:\n  port: 8000\n"
    )
    with pytest.raises(SettingsError) as info:
        load_settings({}, config_file=config_file, environ={})

    assert [problem.located() for problem in info.value.problems] == [
        f"{config_file}:1: setting 'http_port': expected int, got 'eighty'",
        f"{config_file}:2: setting 'max_instances_total': must be >= 1, got 0",
    ]


# ------------------------------------------------------------------ response cache


def test_cache_config_from_flags_yaml_and_environment(tmp_path: Path) -> None:
    from_flags = load_settings(
        {"cache_config": ["local,size=1048576", "local,size=4096"]}, environ={}
    )
    assert from_flags.cache_config == ("local,size=1048576", "local,size=4096")
    assert from_flags.response_cache_bytes == 4096
    config_file = yaml_file(tmp_path, "cache_config: ['local,size=2048']\n")
    assert load_settings({}, config_file=config_file, environ={}).response_cache_bytes == 2048
    from_env = load_settings({}, environ={"EDGEBOX_CACHE_CONFIG": "local,size=8192"})
    assert from_env.response_cache_bytes == 8192
    assert Settings().response_cache_bytes == 0


def test_a_cache_other_than_local_is_refused_naming_the_flag() -> None:
    assert settings_error(flags={"cache_config": ["redis,host=10.0.0.1"]}) == (
        "setting 'cache_config' from --cache-config: cache 'redis' in 'redis,host=10.0.0.1' "
        "is not supported: edgebox has only Triton's 'local' cache ('local,size=<bytes>')"
    )


def test_a_bad_cache_size_is_refused_naming_the_variable() -> None:
    assert settings_error(environ={"EDGEBOX_CACHE_CONFIG": "local,size=0"}) == (
        "setting 'cache_config' from EDGEBOX_CACHE_CONFIG: the local cache's size must be "
        "a positive number of bytes, got '0'"
    )
