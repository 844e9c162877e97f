"""Fixtures every test file shares."""

from __future__ import annotations

import functools
import os
import re

import pytest

from demo import KNOBS

# the tests' broken compiler (runtime.Compiler) is each fault test's own: one left set in the shell would fail every
# build that the helper processes, started by any test, make
os.environ.pop("KERNELPY_COMPILER_FAULT", None)

# the modules whose tests run once on each OpenCL device here that compiles a kernel (README, "The tests are the
# spec"), so that a defect of one device can't hide behind another; the rest run on the first. On the second and later
# devices test_runtime.py's corpus-wide replays verify a sample holding each kind of kernel (later_device, below),
# and test_search.py and test_bench.py run the tests they name in ON_EVERY_DEVICE (what builds, loads and runs on the
# device; the rest, the search's own logic: its cache, timeouts, command line, ranking, and bench.py's tables, run on
# the first). KERNELPY_DEVICE set: all on that one
EVERY_DEVICE = ("test_runtime", "test_search", "test_bench")


@pytest.fixture(autouse=True)
def _heuristic_defaults(monkeypatch):
    """Every test starts from the heuristics' knobs' defaults (demo.KNOBS): a knob left set in the shell can't change
    which opts the golden corpus expects."""
    for knob in KNOBS:
        monkeypatch.delenv(knob, raising=False)


@functools.cache
def working_devices() -> list[str]:
    """runtime.working_devices(), named; none where pyopencl or a platform is missing (the tests then skip)."""
    try:
        import runtime

        return [f"{d.name.strip()} ({d.platform.name.strip()})" for d in runtime.working_devices()]
    except Exception:  # noqa: BLE001 (the device fixture says why)
        return []


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml's addopts: pytest-xdist): the whole suite in a process a core, a file to a process,
    about three minutes on two; the tests named on the command line in this one (`pytest test_kernel.py -v`)."""
    return 0 if config.args_source is pytest.Config.ArgsSource.ARGS else None  # None: xdist's own count


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist: every worker tests the devices this process found (workers that probed each on its own could,
    on a compiler that fails now and then, find other devices and collect other tests: the run would stop)."""
    node.workerinput["working_devices"] = working_devices()


def pytest_generate_tests(metafunc):
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    every = getattr(metafunc.module, "ON_EVERY_DEVICE", None)  # a module may name the tests of its that need it
    if every is not None and metafunc.function.__name__ not in every:
        return
    if "device" in metafunc.fixturenames and module in EVERY_DEVICE and not os.environ.get("KERNELPY_DEVICE"):
        shared = getattr(metafunc.config, "workerinput", {})  # a pytest-xdist worker: the devices the run found
        if len(names := shared["working_devices"] if "working_devices" in shared else working_devices()) > 1:
            ids = [re.sub(r"\W+", "-", name).strip("-") for name in names]
            metafunc.parametrize("device", [str(i) for i in range(len(names))], ids=ids, indirect=True, scope="session")


@pytest.hookimpl(tryfirst=True)  # before -m selects by the markers
def pytest_collection_modifyitems(items):
    """The markers a reader selects by (pyproject.toml lists them): `device` on every test that uses the device
    fixture, `spec` on every test that is none of that, `corpus`, `sweep`, `cli`, `browser` and `exercise` (those five
    are marked where the test is); so every test carries one. Then EVERY_DEVICE's tests last, in their groups: no
    other test runs while one of their devices is chosen."""
    for item in items:
        if "device" in item.fixturenames:
            item.add_marker(pytest.mark.device)
        if not any(item.get_closest_marker(n) for n in ("device", "corpus", "sweep", "cli", "browser", "exercise")):
            item.add_marker(pytest.mark.spec)
    items.sort(key=lambda item: hasattr(item, "callspec") and "device" in item.callspec.params)


@pytest.fixture(scope="session")
def device(request):
    """The OpenCL device runtime.py runs on (for EVERY_DEVICE's tests, each in turn, as KERNELPY_DEVICE chooses it);
    tests that need one skip, saying why, where there is none."""
    R = pytest.importorskip("runtime")
    if (choice := getattr(request, "param", None)) is not None:
        saved = os.environ.get("KERNELPY_DEVICE"), R._device
        os.environ["KERNELPY_DEVICE"], R._device = choice, None

        def restore():
            os.environ.pop("KERNELPY_DEVICE") if saved[0] is None else os.environ.update(KERNELPY_DEVICE=saved[0])
            R._device = saved[1]

        request.addfinalizer(restore)
    try:
        return R.get_device()
    except R.NoDeviceError as e:
        pytest.skip(f"no OpenCL device to run kernels on: {e}")


@pytest.fixture
def later_device(request) -> bool:
    """Whether the test runs on EVERY_DEVICE's second or a later device: there the corpus-wide replays of
    test_runtime.py verify a sample that holds each kind of kernel (the first device verifies them all);
    RUNTIME_ALL_DEVICES=1 verifies them all on each."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    return params.get("device", "0") != "0" and not os.environ.get("RUNTIME_ALL_DEVICES")


@pytest.fixture
def no_colour_settings(monkeypatch):
    """Neither NO_COLOR nor FORCE_COLOR from the shell: the test sets the ones it runs under."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """The project's cache folder (the search's answers), empty and the test's own: never the user's."""
    monkeypatch.setenv("KERNELPY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"
