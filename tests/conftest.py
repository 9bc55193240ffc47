"""Shared pytest fixtures."""

from __future__ import annotations

import inspect

import pytest

from storbench.core import paths
from storbench.core.model import Host
from tests.sshd import SshdUnavailable, SshLab, lab_host

SSH_ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")


@pytest.fixture(scope="session", autouse=True)
def own_user_cache(tmp_path_factory):
    """The tests' own user cache (fio's kept answers): none from an earlier session, none left
    in the home of whoever runs them; the Snakemake runs of the tests inherit it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("user-cache")))
        yield


@pytest.fixture(scope="session")
def ssh_lab(tmp_path_factory):
    """Four real sshd on 127.0.0.2 .. 127.0.0.5 (lab.servers), stopped at session end.

    lab.client_key, lab.known_hosts, lab.start(address) for an extra server.
    """
    try:
        lab = SshLab(tmp_path_factory.mktemp("sshd"))
    except SshdUnavailable as exc:
        # Not a skip: CI must not silently drop the SSH tests.
        pytest.fail(str(exc), pytrace=False)
    try:
        for address in SSH_ADDRESSES:
            lab.start(address)
        yield lab
    finally:
        lab.stop_all()


@pytest.fixture(scope="session")
def ssh_hosts(ssh_lab, tmp_path_factory) -> list[Host]:
    """HostSpecs (transport ssh, user root) for the lab's first two servers, in address order."""
    workdirs = tmp_path_factory.mktemp("ssh-workdirs")
    return [lab_host(ssh_lab, server, workdirs / server.address) for server in ssh_lab.servers[:2]]


@pytest.fixture(scope="session")
def tree_gateway(ssh_lab, ssh_hosts) -> str:
    """A ClusterShell gateway for ssh_hosts[0]: an sshd on 127.0.0.41 on the same port (a
    gateway reaches its hosts with their own SSH settings)."""
    return ssh_lab.start("127.0.0.41", port=ssh_hosts[0].port).address


@pytest.fixture(scope="session")
def minio(tmp_path_factory):
    """A real MinIO on 127.0.0.1 with fresh random root credentials, stopped at session end."""
    import shutil

    from tests.minio import MinioUnavailable, start_minio

    try:
        server = start_minio(tmp_path_factory.mktemp("minio"))
    except MinioUnavailable as exc:
        why = "no Go toolchain" if shutil.which("go") is None else "its build failed"
        pytest.skip(f"S3 tests need MinIO, which could not be built here ({why}): {exc}")
    try:
        yield server
    finally:
        server.stop()


# What a test needs, recognised in its own code and in every fixture it uses (transitively):
# `make unit` deselects these kinds.
NEEDS = {
    "workflow": ("snakemake(", "start_snakemake(", "SNAKEMAKE"),
    "ssh": ("ssh_lab", "ssh_hosts", "SshServer(", "SshLab("),
    "s3": ("minio",),
    "browser": ("chromium", "html_to_pdf", "screenshot(", "report.pdf", "pdftoppm"),
}


def _source(function) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def _module_needles(module) -> dict[str, tuple[str, ...]]:
    """NEEDS plus calls of the module's own helpers that lead to one (to a fixed point)."""
    helpers = {
        name: _source(value)
        for name, value in vars(module).items()
        if inspect.isfunction(value) and not name.startswith("test_")
    }
    needles = {mark: list(found) for mark, found in NEEDS.items()}
    changed = True
    while changed:
        changed = False
        for found in needles.values():
            for name, text in helpers.items():
                call = f"{name}("
                if call not in found and any(needle in text for needle in found):
                    found.append(call)
                    changed = True
    return {mark: tuple(found) for mark, found in needles.items()}


def pytest_collection_modifyitems(config, items):
    by_module: dict = {}
    for item in items:
        module = getattr(item, "module", None)
        if module not in by_module:
            by_module[module] = _module_needles(module) if module else NEEDS
        functions = [getattr(item, "function", None)]
        for definitions in item._fixtureinfo.name2fixturedefs.values():
            functions += [definition.func for definition in definitions]
        text = "\n".join(_source(function) for function in functions if function is not None)
        text += " ".join(item.fixturenames)
        for mark, needles in by_module[module].items():
            if any(needle in text for needle in needles):
                item.add_marker(getattr(pytest.mark, mark))


@pytest.fixture(autouse=True)
def default_campaign_folders():
    """A test that loads a named campaign in this process does not move the next test's paths."""
    yield
    if paths.results_dir() != paths.RESULTS:
        paths.use_campaign(None)
