"""What a model's ``config.pbtxt`` says about publishing its results:
``mqtt_publish`` (``"true"``: every HTTP and gRPC answer also goes to
``{prefix}/{device}/models/{model}/results``) and ``mqtt_outputs``
(``"summary"``, the default: large tensors by shape and datatype; ``"full"``:
every output whole). Read here so that a typo fails the load with the file and
line, rather than silently publishing nothing."""

from __future__ import annotations

from dataclasses import dataclass

from edgebox.summaries import RULE_PARAMETER, rule_problem

PUBLISH_PARAMETER = "mqtt_publish"
OUTPUTS_PARAMETER = "mqtt_outputs"
_BOOLEANS = {"true": True, "false": False}
_OUTPUTS = ("summary", "full")


@dataclass(frozen=True)
class ResultPublishing:
    publish: bool = False
    full_outputs: bool = False


def result_publishing(config) -> ResultPublishing:
    """The config's choice; values ``publishing_problems`` accepts."""
    parameters = config.parameters
    publish = parameters[PUBLISH_PARAMETER].string_value if PUBLISH_PARAMETER in parameters else ""
    outputs = parameters[OUTPUTS_PARAMETER].string_value if OUTPUTS_PARAMETER in parameters else ""
    return ResultPublishing(
        publish=_BOOLEANS.get(publish.strip().lower(), False), full_outputs=outputs == "full"
    )


def publishing_problems(config) -> list[str]:
    problems = []
    parameters = config.parameters
    if PUBLISH_PARAMETER in parameters:
        value = parameters[PUBLISH_PARAMETER].string_value
        if value.strip().lower() not in _BOOLEANS:
            problems.append(
                f"parameter '{PUBLISH_PARAMETER}': expected true or false, got {value!r}"
            )
    if OUTPUTS_PARAMETER in parameters:
        value = parameters[OUTPUTS_PARAMETER].string_value
        if value not in _OUTPUTS:
            problems.append(
                f"parameter '{OUTPUTS_PARAMETER}': expected summary or full, got {value!r}"
            )
    if RULE_PARAMETER in parameters:
        problem = rule_problem(config)
        if problem is not None:
            problems.append(problem)
    return problems
