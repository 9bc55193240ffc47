"""The config's JSON schema (config/schema.yaml) and its errors in words: each as
'<key path>: <problem>', the branch a value meant rather than the first one tried, and name
and address patterns spelled out.
"""

from __future__ import annotations

import re
from functools import cache

import yaml

from storbench.config.source import FAST_SAFE_LOADER, key_path
from storbench.core import paths
from storbench.core.suggest import closest, did_you_mean

SCHEMA_PATH = paths.SCHEMA_PATH


@cache
def _validator():
    import jsonschema  # lazy: loads jsonschema

    schema = yaml.load(SCHEMA_PATH.read_text(), Loader=FAST_SAFE_LOADER)
    return jsonschema.Draft202012Validator(schema)


def schema_problems(raw: dict) -> list[str]:
    return schema_findings(raw)[0]


def schema_findings(raw: dict) -> tuple[list[str], frozenset[str] | None]:
    """The schema's problems, and the experiments they all lie in (None when one lies outside
    every experiment): the other experiments can still be checked for their meaning."""
    problems: set[str] = set()
    experiments: set[str] = set()
    outside = False
    errors = list(_validator().iter_errors(raw))
    misspelt = {found for error in errors for found in _misspelt_required(error)}
    for error in errors:
        if error.validator == "required" and _only_misspelt(error, misspelt):
            continue  # the unknown key that names it says so: 'after: unknown key (... 'at'?)'
        problems.add(_describe_schema_error(error))
        path = list(error.absolute_path)
        if len(path) >= 2 and path[0] == "experiments":
            experiments.add(str(path[1]))
        else:
            outside = True
    return sorted(problems), None if outside else frozenset(experiments)


def _misspelt_required(error) -> list[tuple]:
    """(mapping's path, required key) where the unknown key its problem names is a missing
    required key misspelt."""
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return []
    known = error.schema.get("properties", {})
    required = set(error.schema.get("required", ())) - set(error.instance)
    path = tuple(error.absolute_path)
    extra = sorted(key for key in error.instance if key not in known and isinstance(key, str))
    meant = closest(extra[0], known, synonyms=KEY_SYNONYMS) if extra else None  # as described
    return [(path, meant)] if meant in required else []


def _only_misspelt(error, misspelt: set[tuple]) -> bool:
    missing = [key for key in error.validator_value if key not in error.instance]
    path = tuple(error.absolute_path)
    return bool(missing) and all((path, key) in misspelt for key in missing)


_NAME_RULES = {  # the name patterns of config/schema.yaml, in words
    "^[A-Za-z0-9][A-Za-z0-9_.-]*$": "letters, digits, '_', '.', '-'; first a letter or digit",
    "^[a-z][a-z0-9_]*$": "lowercase letters, digits, '_'; first a letter",
}
_ADDRESS = "a host name or IP address: letters, digits, . : _ -, an IPv6 address bare or in [ ]"
_VALUE_RULES = {  # the address patterns of config/schema.yaml, in words
    "^[A-Za-z0-9][A-Za-z0-9.:_-]*$": "a host name or IP address: letters, digits, . : _ -",
    "^[A-Za-z0-9:\\[][A-Za-z0-9.:_\\[\\]-]*$": _ADDRESS,
    "^[A-Za-z0-9{:\\[][A-Za-z0-9.:_{}\\[\\]-]*$": f"{_ADDRESS}, with {{name}} and {{n}}",
}
_ENDPOINT = "^https?://([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?(/[^\\s,]*)?$"
_PATTERN_WORDS = {  # the other value patterns of config/schema.yaml, in words
    "^/": "an absolute path (from /)",
    _ENDPOINT: "the S3 server's URL, http(s)://host[:port][/path] (no ',': the tools would read"
    " two endpoints)",
    "^[a-z0-9][a-z0-9.-]{1,40}$": "2 to 41 lowercase letters, digits, '.' or '-', first a letter"
    " or digit (S3's bucket rules: buckets are named <bucket_prefix>-<experiment>)",
    "^-[0-9]+(\\.[0-9]+)?%$": "a drop in percent, with its sign ('-5%')",
    "^\\+[0-9]+(\\.[0-9]+)?%$": "a rise in percent, with its sign ('+10%')",
}
_SIGNED_PERCENT = {"^-[0-9]+(\\.[0-9]+)?%$": "-", "^\\+[0-9]+(\\.[0-9]+)?%$": "+"}


def _describe_schema_error(error) -> str:
    path = list(error.absolute_path)
    if _may_hold_a_key(path, error.instance):
        return _without_value(error, path)
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = error.schema.get("properties", {})
        extra = sorted(set(error.instance) - set(known))
        meant = _meant(extra[0], known)
        if not meant and len(path) == 2 and path[0] == "experiments":
            meant = " (the tool's own options go under job: or sweep:)"
        return f"{key_path(path + extra[:1])}: unknown key{meant}" + (
            f" (also {', '.join(map(repr, extra[1:]))})" if len(extra) > 1 else ""
        )
    if _a_sweep_of_one_value(error, path):
        return (
            f"{key_path(path)}: a sweep lists its values ([{error.instance}]), not"
            f" {error.instance!r}; one value for every run goes under job:"
        )
    if _unquoted_braces(error):
        written = "{" + ", ".join(map(str, error.instance)) + "}"
        return (
            f"{key_path(path)}: {written} unquoted is a YAML mapping, not a host-fact"
            f' expression: quote it ("{written}")'
        )
    if _a_scalar_for_a_list(error):
        return f"{key_path(path)}: a list goes here ([{error.instance}]), not {error.instance!r}"
    if error.validator == "propertyNames":
        return f"{key_path(path)}: bad name {error.instance!r} (letters, digits, '_', '.', '-')"
    if error.validator == "maxLength" and "propertyNames" in error.absolute_schema_path:
        return (
            f"{key_path(path)}: bad name {error.instance[:40]!r}... ({len(error.instance)} "
            f"characters; at most {error.validator_value})"
        )
    if error.validator == "pattern" and "propertyNames" in error.absolute_schema_path:
        rule = _NAME_RULES.get(error.validator_value, f"must match {error.validator_value!r}")
        return f"{key_path(path)}: bad name {error.instance!r} ({rule})"
    if error.validator == "pattern" and error.validator_value in _NAME_RULES:
        rule = _NAME_RULES[error.validator_value]
        return f"{key_path(path)}: {error.instance!r} is not a name ({rule})" + _a_path_for(
            path, error.instance
        )
    if error.validator == "pattern" and error.validator_value in _VALUE_RULES:
        return f"{key_path(path)}: {error.instance!r} is not {_VALUE_RULES[error.validator_value]}"
    if error.validator == "pattern" and error.validator_value in _PATTERN_WORDS:
        words = _PATTERN_WORDS[error.validator_value]
        return f"{key_path(path)}: {error.instance!r} is not {words}" + _pattern_hint(
            error.validator_value, error.instance
        )
    if error.validator == "pattern" and "description" in error.schema:
        return f"{key_path(path)}: {error.message} ({error.schema['description']})"
    if error.validator == "enum" and all(isinstance(v, str) for v in error.validator_value):
        as_yaml = str(error.instance).lower() if isinstance(error.instance, bool) else None
        message = f"{as_yaml} is not one of {error.validator_value}" if as_yaml else error.message
        return f"{key_path(path)}: {message}" + _value_meant(error.instance, error.validator_value)
    if error.validator in ("oneOf", "anyOf") and error.context:
        return _describe_alternatives(error, path)
    if error.validator == "required":
        return f"{key_path(path)}: {error.message}"
    return f"{key_path(path)}: {error.message}"


# values as other tools or papers write them
VALUE_SYNONYMS: dict[str, tuple[str, ...]] = {
    "bw": ("bandwidth",),
    "bandwidth": ("bw",),
    "throughput": ("bandwidth", "bw"),
    "latency": ("lat_mean",),
    **dict.fromkeys(("clush", "pdsh", "fabric", "paramiko", "openssh"), ("ssh",)),
    "localhost": ("local",),
    "seq": ("sequential",),
    "rand": ("random",),
    **dict.fromkeys(("dir", "fs", "filesystem", "file", "posix", "nfs", "mount"), ("directory",)),
    **dict.fromkeys(("device", "disk", "bdev", "lun", "raw", "dev"), ("block",)),
    **dict.fromkeys(("object", "objects", "minio", "bucket"), ("s3",)),
    **dict.fromkeys(("si", "mb", "gb", "mb/s", "gb/s"), ("decimal",)),
    **dict.fromkeys(("iec", "mib", "gib", "mib/s", "gib/s"), ("binary",)),
}
PERCENTILE_NAME = re.compile(r"p[0-9]")


def _value_meant(value, allowed: list[str]) -> str:
    """' (did you mean 'x'?)' for a value of the wrong case, another tool's word for one of
    allowed, or one spelt close to it; never another percentile for one not kept (p95)."""
    if isinstance(value, (dict, list)) or value is None:
        return ""
    text = str(value)
    meant = [name for name in allowed if name.lower() == text.lower()]
    meant += [name for name in VALUE_SYNONYMS.get(text.lower(), ()) if name in allowed]
    if meant:
        return f" (did you mean {meant[0]!r}?)"
    if PERCENTILE_NAME.match(text):
        return ""
    return did_you_mean(text, allowed)


def _pattern_hint(pattern: str, value: str) -> str:
    """What was meant, where a value is close to the pattern's form."""
    if pattern == "^/" and value.startswith("~"):
        return "; '~' is not expanded: write the whole path"
    if pattern == _ENDPOINT and "://" not in value:
        return f"; with its scheme: 'http://{value}' or 'https://{value}'"
    if pattern == _ENDPOINT and value.startswith("s3://"):
        return "; s3:// names a bucket, not a server (the bucket comes from bucket_prefix)"
    if pattern in _SIGNED_PERCENT and value[:1].isdigit():
        return f" (did you mean '{_SIGNED_PERCENT[pattern]}{value}'?)"
    return ""


# keys as other tools name them (Ansible's inventories, ssh_config, other benchmark harnesses)
KEY_SYNONYMS = {
    "hosts": "nodes",
    "nodeset": "nodes",
    "hostnames": "nodes",
    "username": "user",
    "login": "user",
    "identity_file": "identity",
    "identityfile": "identity",
    "key_file": "identity",
    "proxyjump": "jump",
    "proxy_jump": "jump",
    "jump_host": "jump",
    "bastion": "jump",
    "strict_host_key_checking": "host_key_check",
    "stricthostkeychecking": "host_key_check",
    "options": "job",
    "params": "job",
    "parameters": "job",
    "repeat": "iterations",
    "repeats": "iterations",
    "test": "check",  # a set-up step's
    "verify": "check",
    "unless": "check",
    "after": "at",  # a fault's time
    "when": "at",
    "time": "at",
}


def _meant(key, known) -> str:
    """' (did you mean 'x'?)' for a key the schema knows under a close or other tools' name."""
    return did_you_mean(key, known, synonyms=KEY_SYNONYMS) if isinstance(key, str) else ""


def _a_path_for(path: list, value) -> str:
    """A path where an experiment names its target: where the path goes."""
    names_target = path[:1] == ["experiments"] and path[2:3] == ["target"]
    if names_target and isinstance(value, str) and value.startswith("/"):
        return "; name a target defined under targets: (a path goes in its path:)"
    return ""


def _unquoted_braces(error) -> bool:
    """numjobs: {cores} -- YAML reads it as the mapping {'cores': None}."""
    instance = error.instance
    return (
        error.validator == "type"
        and isinstance(instance, dict)
        and bool(instance)
        and all(value is None for value in instance.values())
    )


def _a_scalar_for_a_list(error) -> bool:
    return (
        error.validator == "type"
        and error.validator_value == "array"
        and isinstance(error.instance, str | int | float)
    )


def _a_sweep_of_one_value(error, path: list) -> bool:
    in_sweep = path[:1] == ["experiments"] and path[2:3] == ["sweep"] and len(path) in (4, 5)
    return in_sweep and _a_scalar_for_a_list(error)


def _may_hold_a_key(path: list, instance) -> bool:
    """A credentials entry (a key pasted where its variable's name goes) or an endpoint with
    user:key@ in it: its problem is told without the value."""
    in_url = path[-1:] == ["endpoint"] and isinstance(instance, str) and "@" in instance
    return "credentials" in path or in_url


def _without_value(error, path: list) -> str:
    where = key_path(path)
    if path[-1:] == ["endpoint"]:
        return (
            f"{where}: a user or key in the URL (user:key@host) is not allowed; the keys go"
            " under credentials (the value is not shown)"
        )
    if error.validator == "pattern":
        return (
            f"{where}: must be the NAME of an environment variable (letters, digits, '_'; not"
            " first a digit), not its value (the value is not shown: it may be a key)"
        )
    if error.validator == "additionalProperties":
        known = error.schema.get("properties", {})
        extra = sorted(set(error.instance) - set(known))
        return (
            f"{key_path(path + extra[:1])}: unknown key{_meant(extra[0], known)}; a config"
            " never holds a key itself, only the names of the environment variables (or the"
            " file) holding them (the value is not shown)"
        )
    if error.validator == "oneOf":
        return f"{where}: either access_key_env and secret_key_env, or file (and a profile)"
    if error.validator == "type":
        return f"{where}: must be a {error.validator_value} (the value is not shown)"
    return f"{where}: not valid ({error.validator} {error.validator_value!r}; value not shown)"


def _wrong_type(error, path: list) -> bool:
    """The error says the value itself (not something inside it) is of another type."""
    return error.validator == "type" and list(error.absolute_path) == path


def _describe_alternatives(error, path) -> str:
    """Describe the branch the instance meant (its `type` matched), not the first one tried."""
    branches: dict = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    meant = [errs for errs in branches.values() if not any(e.validator == "const" for e in errs)]
    # a branch of another type is not what the value meant ([] is a list: not 'not a string')
    typed = [errs for errs in meant if not any(_wrong_type(e, path) for e in errs)]
    if len(typed) == 1:
        meant = typed
    if len(meant) == 1:
        return _describe_schema_error(min(meant[0], key=lambda e: len(list(e.absolute_path))))
    if all(e.validator == "required" for e in error.context):  # {poll: 10s}: wait or command
        needs = dict.fromkeys(" and ".join(e.validator_value) for e in error.context)
        return f"{key_path(path)}: needs {' or '.join(needs)}"
    consts = [e for e in error.context if e.validator == "const"]
    if not meant and consts:
        allowed = [str(e.validator_value) for e in consts]
        hint = _value_meant(consts[0].instance, allowed)
        return (
            f"{key_path(list(consts[0].absolute_path))}: must be one of {', '.join(allowed)}{hint}"
        )
    best = min(error.context, key=lambda e: len(list(e.absolute_path)))
    return f"{key_path(path)}: {best.message}"
