"""Turn the text of plain options into values without pydantic.

typer coerces every parameter through a pydantic ``TypeAdapter``
(``typer._coercion.build_runtime_param``), and importing pydantic and building one
adapter per parameter costs more than most verbs take to run. ltm's options are
text, flags, whole numbers in a range, lists of text and choices (an Enum): for those this module
gives typer a coercion of its own, as typer's lazy ``get_runtime_param`` asks for
one; anything else (paths, choices, files, dates) still goes to typer's.

It leans on two names inside typer, ``_TyperParameter.get_runtime_param`` and
``_coercion.RuntimeParam``; ``tests/test_cli_parser.py`` pins both and checks that
a plain verb loads no pydantic, so a typer release that moves them fails there,
not in a user's terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, get_args, get_origin

PLAIN = (str, int, float, bool)


def _plain_item(annotation: Any) -> bool:
    return annotation in PLAIN or _choice(annotation)


def _choice(annotation: Any) -> bool:
    """An Enum of words (``ltm mcp install CLIENT``): pydantic's message for a word not
    among them began "Value error, "."""
    return isinstance(annotation, type) and issubclass(annotation, Enum)


def handles(annotation: Any, parameter_info: Any) -> bool:
    """Whether this module coerces the parameter (else typer's own adapter does)."""
    if parameter_info.parser is not None or getattr(parameter_info, "click_type", None):
        return False
    if get_origin(annotation) is list:
        args = get_args(annotation)
        return len(args) == 1 and _plain_item(args[0])
    return _plain_item(annotation)


def _word(value: str, kind: type) -> Any:
    """One command-line word as ``kind``; ValueError with the reason when it is not one."""
    if kind is str:
        return value
    if _choice(kind):
        try:
            return kind(value)
        except ValueError:
            names = ", ".join(str(member.value) for member in kind)  # type: ignore[attr-defined]
            raise ValueError(f"{value!r} is not one of {names}") from None
    if kind is bool:  # what click's BOOL type takes for an option given a value
        lowered = value.strip().lower()
        if lowered in ("1", "true", "t", "yes", "y", "on"):
            return True
        if lowered in ("0", "false", "f", "no", "n", "off"):
            return False
        raise ValueError(f"{value!r} is not true or false")
    try:
        return kind(value)
    except ValueError:
        noun = "a whole number" if kind is int else "a number"
        raise ValueError(f"{value!r} is not {noun}") from None


def install() -> None:
    """Give typer's parameters this coercion where it applies (idempotent)."""
    from typer import _coercion, core
    from typer._click.exceptions import BadParameter

    if getattr(core._TyperParameter.get_runtime_param, "_ltm", False):
        return

    @dataclass(frozen=True)
    class PlainRuntimeParam(_coercion.RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            many = get_origin(self.annotation) is list
            kind = get_args(self.annotation)[0] if many else self.annotation
            try:
                items = [self._one(item, kind) for item in value] if many else None
                return items if many else self._one(value, kind)
            except ValueError as exc:
                raise BadParameter(str(exc), ctx=ctx, param=param) from None

        def _one(self, value: Any, kind: type) -> Any:
            result: Any = value if isinstance(value, kind) else _word(str(value), kind)
            low, high = self.parameter_info.min, self.parameter_info.max
            if kind in (int, float) and not isinstance(result, bool):
                if low is not None and result < low:
                    raise ValueError(f"{result} is below the least allowed, {low}")
                if high is not None and result > high:
                    raise ValueError(f"{result} is above the most allowed, {high}")
            return result

    original = core._TyperParameter.get_runtime_param

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            described = self.type_descriptor
            if described.file_annotation is None and handles(
                described.annotation, described.parameter_info
            ):
                self._runtime_param = PlainRuntimeParam(
                    annotation=described.annotation, parameter_info=described.parameter_info
                )
        return original(self)

    get_runtime_param._ltm = True  # type: ignore[attr-defined]
    core._TyperParameter.get_runtime_param = get_runtime_param  # type: ignore[method-assign]
