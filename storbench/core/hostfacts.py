"""Job parameters written as expressions over the facts of the host they run on.

A job value in braces is computed per host from that host's telemetry, so a sizing rule is
written once for every host of a campaign::

    job:
      numjobs: "{cores}"                 # 8 on an 8-core client
      size: "{2 * mem // cores}"         # twice the page cache per job, in bytes
      iodepth: "{max(1, cores // 2)}"
      filename_format: "file-{host_index}"

Names an expression may use:

- ``cores``: online logical CPUs of the host
- ``sockets``: CPU sockets (packages) of the host
- ``mem``: memory (MemTotal) in bytes
- ``mem_gib``: memory in GiB (a float)
- ``nic_speed``: speed of the host's fastest NIC in Mbit/s (0 if no NIC reports one)
- ``hosts``: number of hosts in the run
- ``host_index``: position of this host in the run, from 0
- ``storage_nodes``, ``storage_cores``, ``storage_mem``, ``storage_mem_gib``: the storage
  cluster as the config's ``storage:`` section declares it (nodes, their cores and memory in
  all), for sizing rules such as Elastifile's ``numjobs: "{storage_cores // 2}"``

Allowed: numbers, those names, ``+ - * / // % **``, unary ``+``/``-``, parentheses, and the
functions ``min max round int ceil floor abs``. A value that is one expression alone becomes
a number (an integer when it is whole: ``{2 * mem / cores}`` gives ``4294967296``, not
``4294967296.0``; use ``//`` to be sure of an integer); an expression inside other text is
substituted into it (``file-{host_index}`` gives ``file-3``). In a value with an
expression, ``{{`` and ``}}`` are literal braces; a value without one is left as written.

Expressions are checked with Python's ``ast`` against that whitelist and computed by a
small interpreter: nothing is ever executed, and attribute access, strings, other calls or
unknown names are refused with the expression and the reason. The rendered job files show
the resolved values.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any


def _round(number, ndigits=None):
    # round(5, -10**18) would build 10**10**18: keep ndigits small
    if ndigits is not None and (not isinstance(ndigits, int) or abs(ndigits) > 100):
        raise HostFactError(f"round() digits must be an integer from -100 to 100, got {ndigits!r}")
    return round(number, ndigits)


HOST_NAMES = ("cores", "sockets", "mem", "mem_gib", "nic_speed", "hosts", "host_index")
STORAGE_NAMES = ("storage_nodes", "storage_cores", "storage_mem", "storage_mem_gib")
NAMES = HOST_NAMES + STORAGE_NAMES
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "round": _round,
    "int": int,
    "ceil": math.ceil,
    "floor": math.floor,
    "abs": abs,
}
MAX_EXPRESSION_CHARS = 500
MAX_INT_BITS = 256  # far beyond any byte count; stops 2**10**10 before it is computed

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_NOT_ALLOWED = {
    ast.Attribute: "attribute access is not allowed",
    ast.Subscript: "subscripts are not allowed",
    ast.Lambda: "lambdas are not allowed",
    ast.Compare: "comparisons are not allowed",
    ast.BoolOp: "and/or are not allowed",
    ast.IfExp: "if/else is not allowed",
    ast.JoinedStr: "strings are not allowed",
}


class HostFactError(ValueError):
    """An expression that cannot be computed; the message names it and says why."""


def has_expression(value) -> bool:
    """True for a string holding at least one ``{...}`` (``{{``/``}}`` do not count)."""
    if not isinstance(value, str):
        return False
    return any(match.group(1) is not None for match in _TOKEN.finditer(value))


def expression_names(facts: dict, *, hosts_in_run: int, host_index: int) -> dict:
    """The names of the module docstring for one host, from its telemetry facts.

    A fact the host did not report is None; an expression using it fails naming it.
    """
    mem = facts.get("mem_bytes")
    speeds = [nic.get("speed_mbps") for nic in facts.get("nics") or []]
    return {
        "cores": facts.get("cores"),
        "sockets": facts.get("sockets"),
        "mem": mem,
        "mem_gib": mem / 2**30 if mem is not None else None,
        "nic_speed": max((s for s in speeds if isinstance(s, int) and s > 0), default=0),
        "hosts": hosts_in_run,
        "host_index": host_index,
    }


def storage_names(storage: dict | None) -> dict:
    """The storage_* names from a config's storage section (per node: cores, memory bytes)."""
    if not storage:
        return {}
    nodes = int(storage["nodes"])
    cores = int(storage["cores"]) * nodes if "cores" in storage else None
    mem = int(storage["memory"]) * nodes if "memory" in storage else None
    return {
        "storage_nodes": nodes,
        "storage_cores": cores,
        "storage_mem": mem,
        "storage_mem_gib": mem / 2**30 if mem is not None else None,
    }


def used_names(value) -> set[str]:
    """The names the expressions in a value use (unparsable ones use none)."""
    found: set[str] = set()
    if not has_expression(value):
        return found
    try:
        parts = split_expressions(value)
    except HostFactError:
        return found
    for part in parts:
        if isinstance(part, _Expression):
            try:
                tree = _parse(part.source)
            except HostFactError:
                continue
            found |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return found


def evaluate(text: str, names: dict):
    """Compute the expressions in text: a number for ``{expr}`` alone, else a string."""
    parts = split_expressions(text)
    if len(parts) == 1 and isinstance(parts[0], _Expression):
        return _compute(parts[0].source, names)
    pieces = []
    for part in parts:
        if isinstance(part, _Expression):
            pieces.append(_format(_compute(part.source, names)))
        else:
            pieces.append(part)
    return "".join(pieces)


def resolve(params: dict, names: dict) -> dict:
    """params with every value that has an expression computed; other values unchanged."""
    resolved = {}
    for key, value in params.items():
        if has_expression(value):
            try:
                resolved[key] = evaluate(value, names)
            except HostFactError as error:
                raise HostFactError(f"{key}: {error}") from None
        else:
            resolved[key] = value
    return resolved


def check(params: dict, key_prefix: str) -> list[str]:
    """Problems of the expressions in params, without any host's facts.

    Finds syntax errors, constructs outside the whitelist and unknown names, each as
    '<key_prefix>.<option>: <reason>'. Values are not computed (no facts yet), so a
    division by zero is found only when the job is rendered.
    """
    problems = []
    for key, value in params.items():
        if not has_expression(value):
            continue
        try:
            for part in split_expressions(value):
                if isinstance(part, _Expression):
                    _check_tree(part.source)
        except HostFactError as error:
            problems.append(f"{key_prefix}.{key}: {error}")
    return problems


# -- parsing ------------------------------------------------------------------------------


class _Expression:
    def __init__(self, source: str):
        self.source = source


def split_expressions(text: str) -> list:
    """Literal text and _Expression parts, in order; ``{{``/``}}`` become braces."""
    parts: list = []
    literal = []
    position = 0
    for match in _TOKEN.finditer(text):
        literal.append(text[position : match.start()])
        position = match.end()
        token = match.group(0)
        if token in ("{{", "}}"):
            literal.append(token[0])
        elif match.group(1) is not None:
            if "".join(literal):
                parts.append("".join(literal))
            literal = []
            parts.append(_Expression(match.group(1)))
        else:
            raise HostFactError(
                f"{text!r}: unmatched {token!r} at position {match.start()}"
                " (write {{ or }} for a literal brace)"
            )
    literal.append(text[position:])
    if "".join(literal):
        parts.append("".join(literal))
    return parts


def _parse(source: str) -> ast.expr:
    if not source.strip():
        raise HostFactError("{}: empty expression")
    if len(source) > MAX_EXPRESSION_CHARS:
        raise HostFactError(f"{{{source[:40]}...}}: longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        return ast.parse(source.strip(), mode="eval").body
    except SyntaxError as error:
        raise HostFactError(f"{{{source}}}: syntax error: {error.msg}") from None
    except (RecursionError, MemoryError, ValueError) as error:
        raise HostFactError(f"{{{source}}}: cannot parse: {type(error).__name__}") from None


def _check_tree(source: str) -> None:
    """Refuse anything outside the whitelist, or a name no host has."""
    tree = _parse(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        reason = _refusal(node, known_names=NAMES)
        if not reason and isinstance(node, ast.Name) and node.id in FUNCTIONS:
            reason = None if id(node) in called else _uncalled(node.id)
        if reason:
            raise HostFactError(f"{{{source}}}: {reason}")


def _refusal(node: ast.AST, *, known_names) -> str | None:
    """Why node is not allowed, or None when it is."""
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"only numbers are allowed, not {type(value).__name__} {value!r}"
    elif isinstance(node, ast.Name):
        if node.id not in known_names and node.id not in FUNCTIONS:
            return f"unknown name {node.id!r} (known: {', '.join(NAMES)})"
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            return f"only {', '.join(FUNCTIONS)} can be called"
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
            return f"{node.func.id}() takes plain arguments only"
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            return f"operator {type(node.op).__name__} is not allowed"
    elif isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            return f"operator {type(node.op).__name__} is not allowed"
    elif isinstance(node, ast.operator | ast.unaryop | ast.expr_context):
        return None
    else:
        return _NOT_ALLOWED.get(type(node), f"{type(node).__name__} is not allowed")
    return None


# -- computing ----------------------------------------------------------------------------


def _compute(source: str, names: dict):
    tree = _parse(source)
    try:
        value = _value(tree, names)
    except HostFactError as error:
        raise HostFactError(f"{{{source}}}: {error}") from None
    except ZeroDivisionError:
        raise HostFactError(f"{{{source}}}: division by zero") from None
    except OverflowError:
        raise HostFactError(f"{{{source}}}: result is too large") from None
    except (TypeError, ValueError) as error:
        raise HostFactError(f"{{{source}}}: {error}") from None
    return _tidy(value)


def _value(node: ast.AST, names: dict):
    reason = _refusal(node, known_names=names)
    if reason:
        raise HostFactError(reason)
    if isinstance(node, ast.Constant):
        return _bounded(node.value)
    if isinstance(node, ast.Name):
        if node.id in FUNCTIONS and node.id not in names:
            raise HostFactError(_uncalled(node.id))
        value = names[node.id]
        if value is None:
            raise HostFactError(f"{node.id} is not known for this host")
        return value
    if isinstance(node, ast.UnaryOp):
        return _bounded(_UNARY[type(node.op)](_value(node.operand, names)))
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, names), _value(node.right, names)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _bounded(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # _refusal checked it
        args = [_value(arg, names) for arg in node.args]
        try:
            return _bounded(FUNCTIONS[node.func.id](*args))
        except TypeError as error:
            raise HostFactError(f"bad arguments to {node.func.id}(): {error}") from None
    raise HostFactError(f"{type(node).__name__} is not allowed")  # _refusal lets nothing else by


def _uncalled(function: str) -> str:
    return f"{function} is a function: call it, e.g. {function}(...)"


def _check_power(base, exponent) -> None:
    both_int = isinstance(base, int) and isinstance(exponent, int)
    if both_int and abs(base) > 1 and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS:
        raise HostFactError(f"result of {base} ** {exponent} is too large")


def _bounded(value):
    if isinstance(value, complex):  # (-8) ** 0.5
        raise HostFactError("result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise HostFactError("result is not a finite number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise HostFactError("result is too large")
    return value


def _tidy(value):
    """4.0 -> 4; other floats and ints as they are."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _format(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)
