"""`python -m bench_core apex doctor|build` on CPU: fake nvcc and compilers on PATH, an injected torch/GPU, fake
Apex checkouts. Nothing here needs torch's CUDA, a GPU or the network."""
import dataclasses
import hashlib
import json
import os
import runpy
import shutil
import subprocess
import sys

import pytest
import setuptools

from bench_core import cli
from bench_core.apex_build import commands
from bench_core.apex_build.build import (
    BENCH_EXTENSIONS,
    NARROW_MARK,
    ApexBuildError,
    BuildOutcome,
    narrowing_problem,
    plan_build,
    resolve_source,
    run_build,
    stage_line,
    stage_source,
)
from bench_core.apex_build.doctor import (
    GIB,
    BuildEnvironment,
    Verdict,
    blocking,
    diagnose,
    host_facts,
    max_gcc_for,
    render,
    target_arch,
)
from bench_core.machine.probe import Probe
from bench_core.machine.probe_collect import probe_apex

NVCC_OUT = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Jul_16_07:30:01_PM_PDT_2025
Cuda compilation tools, release {v}, V{v}.48
Build cuda_{v}.r{v}/compiler.36260728_0"""
GCC_OUT = """g++ (Ubuntu {v}-4ubuntu2) {v}
Copyright (C) 2024 Free Software Foundation, Inc.
This is free software; see the source for copying conditions.  There is NO
warranty; not even for MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE."""
CLANG_OUT = """Ubuntu clang version 18.1.3 (1ubuntu1)
Target: x86_64-pc-linux-gnu
Thread model: posix"""

GENUINE = {"name": "apex", "version": "0.1", "summary": "PyTorch Extensions written by NVIDIA"}
SMOKED = {"found": True, "loadable": True, "origin": "/x/amp_C.so", "smoke": {"ok": True, "error": None}}


def fake_tool(folder, name, output):
    """A tiny executable printing `output`, as `name --version` would (printf is a shell builtin: no PATH needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = " ".join("'" + line.replace("'", "'\\''") + "'" for line in output.splitlines())
    path = folder / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' {lines}\n")
    path.chmod(0o755)
    return str(path)


def probe_of(torch="2.11.0+cu130", cuda="13.0", capability=(9, 0), apex=None, error=None):
    data = {"torch": torch, "cuda_runtime": cuda,
            "cuda": {"available": True, "name": "NVIDIA H200", "capability": list(capability)} if capability
            else {"available": False},
            "apex": apex or {"status": "missing", "extensions": {}}}
    if error:
        data["error"] = error
    return Probe.from_dict(data)


@pytest.fixture
def toolchain(tmp_path, monkeypatch):
    """Puts fake tools on an otherwise empty PATH; returns a function building the doctor's environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    for name in ("CUDA_HOME", "CXX", "TORCH_CUDA_ARCH_LIST"):
        monkeypatch.delenv(name, raising=False)

    def make(nvcc="13.0", gcc="13.3.0", ninja=True, arch=None, compiler_out=None, **probe):
        if nvcc:
            fake_tool(bin_dir, "nvcc", NVCC_OUT.format(v=nvcc))
        if gcc or compiler_out:
            fake_tool(bin_dir, "c++", compiler_out or GCC_OUT.format(v=gcc))
        if ninja:
            fake_tool(bin_dir, "ninja", "1.11.1")
        if arch:
            monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", arch)
        return BuildEnvironment.of(probe_of(**probe), host_facts(str(tmp_path / "build")))
    return make


def by_name(checks):
    return {c.name: c for c in checks}


# ------------------------------------------------------------------------------------------------ doctor
def test_a_matching_toolchain_passes_every_check_and_blocks_nothing(toolchain):
    checks = by_name(diagnose(toolchain()))
    assert checks["torch"].message == "torch 2.11.0+cu130, built with CUDA 13.0"
    assert checks["GPU"].message == "NVIDIA H200 (compute capability 9.0)"
    assert checks["nvcc"].verdict is Verdict.OK and "nvcc 13.0" in checks["nvcc"].message
    assert checks["host compiler"].verdict is Verdict.OK
    assert checks["host compiler"].message.endswith("(CUDA 13.0 allows GCC <= 15)")
    assert checks["TORCH_CUDA_ARCH_LIST"].message == "unset: the build targets this GPU's 9.0"
    assert checks["ninja"].verdict is Verdict.OK
    assert checks["apex distribution"].verdict is Verdict.WARN  # not built yet: a warning before a build
    assert checks["apex distribution"].fix == "make apex"
    assert blocking(list(checks.values())) == []


def test_nvcc_of_another_cuda_than_torch_blocks_the_build(toolchain):
    nvcc = by_name(diagnose(toolchain(nvcc="12.4")))["nvcc"]
    assert nvcc.verdict is Verdict.FAIL and nvcc.blocks_build
    assert "nvcc 12.4" in nvcc.message and "!= torch's CUDA 13.0: Apex's setup.py refuses to build" in nvcc.message
    assert nvcc.fix.startswith("put the CUDA 13.0 toolkit's nvcc first on PATH")


def test_no_nvcc_is_a_failure_naming_path_and_cuda_home(toolchain, tmp_path, monkeypatch):
    nvcc = by_name(diagnose(toolchain(nvcc=None)))["nvcc"]
    assert (nvcc.verdict, nvcc.message) == (Verdict.FAIL, "nvcc not found on PATH or in $CUDA_HOME/bin")
    assert nvcc.fix == "install the CUDA 13.0 toolkit and put its bin/ on PATH (or set CUDA_HOME)"
    fake_tool(tmp_path / "cuda" / "bin", "nvcc", NVCC_OUT.format(v="13.0"))  # found through CUDA_HOME instead
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    found = by_name(diagnose(toolchain(nvcc=None)))["nvcc"]
    assert found.verdict is Verdict.OK and str(tmp_path / "cuda" / "bin" / "nvcc") in found.message


@pytest.mark.parametrize(("cuda", "newest"), [("11.8", 11), ("12.1", 12), ("12.4", 13), ("12.6", 13), ("12.8", 14),
                                              ("13.0", 15), ("13.3", 15)])
def test_the_gcc_table_matches_nvccs_host_config(cuda, newest):
    major, minor = map(int, cuda.split("."))
    assert max_gcc_for((major, minor)) == newest


def test_a_gcc_newer_than_the_cuda_allows_blocks_the_build_with_the_version_to_install(toolchain):
    cc = by_name(diagnose(toolchain(cuda="12.4", nvcc="12.4", gcc="14.2.0", torch="2.6.0+cu124")))["host compiler"]
    assert cc.verdict is Verdict.FAIL and cc.blocks_build
    assert cc.message.endswith("is newer than CUDA 12.4 supports (GCC <= 13)")
    assert cc.fix == "install g++-13 and set CXX=g++-13 CC=gcc-13"
    ok = by_name(diagnose(toolchain(cuda="12.8", nvcc="12.8", gcc="14.2.0")))["host compiler"]
    assert ok.verdict is Verdict.OK and "CUDA 12.8 allows GCC <= 14" in ok.message


def test_the_h200s_compiler_banner_is_read_as_gcc_13_3(toolchain):
    """`c++ --version` as the lent H200 prints it (a wrapper named g++-real, with nvcc 13.0.88)."""
    banner = "g++-real (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0\nCopyright (C) 2023 Free Software Foundation, Inc."
    cc = by_name(diagnose(toolchain(gcc=None, compiler_out=banner)))["host compiler"]
    assert cc.verdict is Verdict.OK and cc.message.startswith("gcc 13.3.0 (")


def test_an_old_gcc_fails_and_clang_is_only_warned_about(toolchain, monkeypatch):
    old = by_name(diagnose(toolchain(gcc="8.5.0")))["host compiler"]
    assert old.verdict is Verdict.FAIL and "gcc 8.5.0" in old.message and "older than GCC 9" in old.message
    clang = by_name(diagnose(toolchain(gcc=None, compiler_out=CLANG_OUT)))["host compiler"]
    assert clang.verdict is Verdict.WARN and clang.message.startswith("clang 18.1.3")
    monkeypatch.setenv("CXX", "g++-99")
    missing = by_name(diagnose(toolchain()))["host compiler"]
    assert missing.message == "no C++ compiler: $CXX=g++-99 not found" and missing.blocks_build


def test_no_gpu_needs_an_architecture_list(toolchain):
    gpu = by_name(diagnose(toolchain(capability=None)))["GPU"]
    assert gpu.verdict is Verdict.FAIL and gpu.blocks_build
    assert "the build cannot target an architecture" in gpu.message
    assert gpu.fix.startswith("set TORCH_CUDA_ARCH_LIST to the target GPU's capability, e.g. TORCH_CUDA_ARCH_LIST=9.0")
    env = toolchain(capability=None, arch="9.0")
    checks = by_name(diagnose(env))
    assert checks["GPU"].verdict is Verdict.WARN
    assert checks["GPU"].message.startswith("no GPU visible: building for TORCH_CUDA_ARCH_LIST=9.0")
    assert checks["TORCH_CUDA_ARCH_LIST"].verdict is Verdict.OK and target_arch(env) == "9.0"
    assert blocking(list(checks.values())) == []


@pytest.mark.parametrize(("arch", "verdict"), [("8.0;8.6", Verdict.FAIL), ("8.0;9.0+PTX", Verdict.OK),
                                               ("9.0a", Verdict.OK), ("8.0 9.0", Verdict.OK)])
def test_an_architecture_list_must_cover_the_gpu(toolchain, arch, verdict):
    env = toolchain(arch=arch)
    check = by_name(diagnose(env))["TORCH_CUDA_ARCH_LIST"]
    assert check.verdict is verdict
    assert target_arch(env) == arch  # the user's list is kept as set
    if verdict is Verdict.FAIL:
        assert check.message == "8.0;8.6 does not include this GPU's 9.0: the kernels would fail with 'no kernel image'"
        assert check.fix == "unset TORCH_CUDA_ARCH_LIST, or set it to 9.0"


def test_the_build_targets_the_gpus_capability_when_no_list_is_set(toolchain):
    assert target_arch(toolchain(capability=(8, 9))) == "8.9"


def test_missing_ninja_warns_and_low_disk_warns_then_fails(toolchain):
    env = toolchain(ninja=False)
    ninja = by_name(diagnose(env))["ninja"]
    assert (ninja.verdict, ninja.fix) == (Verdict.WARN, "pip install ninja")
    for free, verdict in ((1 * GIB, Verdict.FAIL), (3 * GIB, Verdict.WARN), (50 * GIB, Verdict.OK)):
        low = dataclasses.replace(env, host=dataclasses.replace(env.host, free_disk_bytes=free))
        disk = by_name(diagnose(low))["disk"]
        assert disk.verdict is verdict, free
    assert "the build needs at least 2 GiB" in by_name(diagnose(dataclasses.replace(
        env, host=dataclasses.replace(env.host, free_disk_bytes=GIB))))["disk"].message


def test_a_cpu_torch_or_no_torch_blocks_the_build(toolchain):
    cpu = by_name(diagnose(toolchain(torch="2.13.0+cpu", cuda=None)))["torch"]
    assert cpu.verdict is Verdict.FAIL and "torch 2.13.0+cpu is a CPU build" in cpu.message
    none = by_name(diagnose(toolchain(torch=None, cuda=None, error="ModuleNotFoundError: No module named 'torch'")))
    assert none["torch"].message == "torch did not import: ModuleNotFoundError: No module named 'torch'"


def test_the_pypi_apex_impostor_is_detected_from_its_metadata(toolchain, tmp_path, monkeypatch):
    site = tmp_path / "site"
    meta = site / "apex-0.9.10.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: apex\nVersion: 0.9.10dev\n"
                                   "Summary: Pyramid toolkit for user management\n")
    monkeypatch.syspath_prepend(str(site))
    found = probe_apex(None, False)  # the probe's own detection: an impostor is judged before torch is used
    assert found["status"] == "impostor"
    check = by_name(diagnose(toolchain(apex=found)))["apex distribution"]
    assert check.verdict is Verdict.FAIL and check.blocks_build
    assert check.message == ("'apex' 0.9.10dev is not NVIDIA Apex (summary \"Pyramid toolkit for user "
                             "management\")")
    assert check.fix == "pip uninstall -y apex"
    assert "fix: pip uninstall -y apex" in render(diagnose(toolchain(apex=found)))


def test_after_a_build_each_extension_reports_import_and_smoke_test(toolchain):
    apex = {"status": "genuine", "distribution": GENUINE, "extensions": {
        "amp_C": SMOKED,
        "fused_layer_norm_cuda": {"found": True, "loadable": False, "error": "ImportError: undefined symbol: _ZN3c10"}}}
    checks = by_name(diagnose(toolchain(apex=apex), after_build=True))
    assert checks["apex distribution"].verdict is Verdict.OK
    assert checks["amp_C"].message == "imports and passed its smoke test on this GPU"
    ln = checks["fused_layer_norm_cuda"]
    assert ln.verdict is Verdict.FAIL and "undefined symbol" in ln.message
    assert ln.fix == "rebuild against this torch: make apex"
    no_gpu = {"status": "genuine", "distribution": GENUINE,
              "extensions": {"amp_C": {"found": True, "loadable": True}}}
    checks = by_name(diagnose(toolchain(apex=no_gpu, capability=None, arch="9.0"), after_build=True))
    assert checks["amp_C"].verdict is Verdict.WARN and checks["amp_C"].message.startswith("imports; no GPU")
    assert checks["fused_layer_norm_cuda"].message.endswith("not built (FusedLayerNorm needs --cuda_ext)")
    missing = by_name(diagnose(toolchain(), after_build=True))["apex distribution"]
    assert missing.verdict is Verdict.FAIL  # after a build, no Apex is a failure


# ------------------------------------------------------------------------------------------------ build plan
UPSTREAM = """import os
from setuptools import setup, find_packages, Extension
ext_modules = []
if os.environ.get("APEX_CPP_EXT") == "1":
    ext_modules.append(Extension("apex_C", ["csrc/flatten_unflatten.cpp"]))
if os.environ.get("APEX_CUDA_EXT") == "1":
    for name in ("amp_C", "syncbn", "fused_layer_norm_cuda", "mlp_cuda"):
        ext_modules.append(Extension(name=name, sources=["csrc/x.cu"]))
setup(
    name="apex",
    ext_modules=ext_modules,
)
"""


def checkout(tmp_path, text=UPSTREAM):
    src = tmp_path / "apex"
    (src / "csrc").mkdir(parents=True)
    (src / "setup.py").write_text(text)
    (src / "csrc" / "x.cu").write_text("// kernel\n")
    return str(src)


def test_the_plan_for_a_capability_9_gpu_narrows_to_three_extensions(tmp_path):
    plan = plan_build(checkout(tmp_path), str(tmp_path / "build"), "9.0", environ={}, python="/venv/bin/python",
                      cpus=16)
    assert plan.extensions == BENCH_EXTENSIONS == ("apex_C", "amp_C", "fused_layer_norm_cuda")
    assert plan.fallback_reason is None
    assert plan.env == {"APEX_CPP_EXT": "1", "APEX_CUDA_EXT": "1", "TORCH_CUDA_ARCH_LIST": "9.0",
                        "APEX_PARALLEL_BUILD": "16", "NVCC_APPEND_FLAGS": "--threads 2"}
    assert plan.argv == ("/venv/bin/python", "-m", "pip", "install", "-v", "--no-build-isolation", "--no-deps",
                         str(tmp_path / "build" / "stage"))
    assert "TORCH_CUDA_ARCH_LIST=9.0" in plan.command_line()


def test_user_settings_win_and_target_installs_into_a_folder(tmp_path):
    plan = plan_build(checkout(tmp_path), str(tmp_path / "build"), "8.0;9.0", target="/tmp/apexlib",
                      environ={"APEX_PARALLEL_BUILD": "4", "NVCC_APPEND_FLAGS": "--threads 8"})
    assert plan.env["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"
    assert (plan.env["APEX_PARALLEL_BUILD"], plan.env["NVCC_APPEND_FLAGS"]) == ("4", "--threads 8")
    assert plan.argv[-4:] == ("--target", "/tmp/apexlib", "--upgrade", str(tmp_path / "build" / "stage"))


def test_full_is_the_upstream_build_without_a_shim(tmp_path):
    src = checkout(tmp_path)
    plan = plan_build(src, str(tmp_path / "build"), "9.0", full=True, environ={})
    assert plan.extensions is None and plan.fallback_reason is None
    stage_source(plan)
    with open(os.path.join(plan.stage_dir, "setup.py")) as fh:
        assert fh.read() == UPSTREAM


@pytest.mark.parametrize(("text", "reason"), [
    (UPSTREAM.replace('"apex_C"', '"flatten_C"'), "upstream setup.py defines no extension named apex_C"),
    ("from distutils.core import setup\nsetup(name='apex', ext_modules=[E('apex_C'), E('amp_C'), "
     "E('fused_layer_norm_cuda')])\n", "upstream setup.py does not call setuptools.setup (structure not recognised)"),
])
def test_the_narrowing_falls_back_to_the_full_build_when_it_cannot_apply(tmp_path, text, reason):
    assert narrowing_problem(text) == reason
    plan = plan_build(checkout(tmp_path, text), str(tmp_path / "build"), "9.0", environ={})
    assert plan.extensions is None and plan.fallback_reason == reason


def test_staging_leaves_the_checkout_untouched_and_the_shim_filters_ext_modules(tmp_path, monkeypatch, capsys):
    src = checkout(tmp_path)
    before = hashlib.sha256(open(os.path.join(src, "setup.py"), "rb").read()).hexdigest()
    plan = plan_build(src, str(tmp_path / "build"), "9.0", environ={})
    stage_source(plan)
    assert hashlib.sha256(open(os.path.join(src, "setup.py"), "rb").read()).hexdigest() == before
    assert sorted(os.listdir(src)) == ["csrc", "setup.py"]
    with open(os.path.join(plan.stage_dir, "setup_upstream.py")) as fh:
        assert fh.read() == UPSTREAM
    seen = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: seen.update(names=[e.name for e in kw["ext_modules"]]))
    monkeypatch.setenv("APEX_CPP_EXT", "1")
    monkeypatch.setenv("APEX_CUDA_EXT", "1")
    runpy.run_path(os.path.join(plan.stage_dir, "setup.py"), run_name="__main__")
    assert seen["names"] == ["apex_C", "amp_C", "fused_layer_norm_cuda"]
    assert f"{NARROW_MARK} building apex_C, amp_C, fused_layer_norm_cuda of 5 extensions" in capsys.readouterr().err
    monkeypatch.delenv("APEX_CUDA_EXT")  # names in the text but not built: the shim stops, it never builds less
    with pytest.raises(SystemExit, match="upstream setup.py built no amp_C, fused_layer_norm_cuda .*--full"):
        runpy.run_path(os.path.join(plan.stage_dir, "setup.py"), run_name="__main__")


def test_stage_lines_are_parsed_from_pip_verbose_output():
    assert stage_line("  building 'amp_C' extension") == "compiling amp_C"
    assert stage_line("[3/15] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile --dependency-output "
                      "/s/build/temp.linux-x86_64-cpython-311/csrc/multi_tensor_adam.o.d -I/s/csrc -c "
                      "/s/csrc/multi_tensor_adam.cu -o /s/build/multi_tensor_adam.o") == "[3/15] multi_tensor_adam.cu"
    assert stage_line("  Successfully installed apex-0.1") == "Successfully installed apex-0.1"
    assert stage_line("  creating build/lib.linux-x86_64-cpython-311") is None
    assert stage_line("  RuntimeError: Error compiling objects for extension") == ("RuntimeError: Error compiling "
                                                                                  "objects for extension")
    assert stage_line("  -Wno-error=deprecated-declarations -O3 " + "-I/x " * 100) is None  # a command line
    assert stage_line("csrc/x.cu(12): error: identifier \"foo\" is undefined").startswith("csrc/x.cu(12): error")


def test_the_build_reports_stages_and_a_heartbeat_and_keeps_the_log(tmp_path):
    script = ("import time\nprint(\"building 'amp_C' extension\", flush=True)\ntime.sleep(0.5)\n"
              "print('[1/2] nvcc -c csrc/multi_tensor_adam.cu -o a.o', flush=True)\n"
              "print('Successfully installed apex-0.1', flush=True)\n")
    plan = dataclasses.replace(plan_build(checkout(tmp_path), str(tmp_path / "build"), "9.0", environ={}),
                               argv=(sys.executable, "-c", script), stage_dir=str(tmp_path))
    said = []
    outcome = run_build(plan, str(tmp_path / "build" / "apex_build.log"), say=said.append, heartbeat_s=0.1)
    assert outcome.returncode == 0
    stages = [s.split("] ", 1)[1] for s in said]
    assert stages[0] == "compiling amp_C"
    assert "still building (last: compiling amp_C)" in stages
    assert stages[-2:] == ["[1/2] multi_tensor_adam.cu", "Successfully installed apex-0.1"]
    assert "building 'amp_C' extension" in open(outcome.log_path).read()
    failing = dataclasses.replace(plan, argv=(sys.executable, "-c", "print('boom'); raise SystemExit(3)"))
    failed = run_build(failing, str(tmp_path / "fail.log"), say=said.append)
    assert failed.returncode == 3 and failed.tail[-1] == "boom"


PY_EXTENSION = """#include <Python.h>
static struct PyModuleDef d = {{PyModuleDef_HEAD_INIT, "{0}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{0}(void) {{ return PyModule_Create(&d); }}
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_real_pip_builds_only_the_named_extensions_from_the_staged_copy(tmp_path):
    """pip + setuptools for real, on a checkout whose other extension does not compile: only the shim's three are
    built, into --target, and the checkout stays as it was (no build/, no .egg-info)."""
    text = UPSTREAM.replace("csrc/flatten_unflatten.cpp", "csrc/apex_C.c").replace(
        'sources=["csrc/x.cu"]', 'sources=["csrc/" + name + ".c"]').replace('    name="apex",', '    name="apex",\n'
                                                                            '    version="0.1",')
    src = checkout(tmp_path, text)
    for name in BENCH_EXTENSIONS:
        (tmp_path / "apex" / "csrc" / f"{name}.c").write_text(PY_EXTENSION.format(name))
    for name in ("syncbn", "mlp_cuda"):
        (tmp_path / "apex" / "csrc" / f"{name}.c").write_text("this is not C\n")
    plan = plan_build(src, str(tmp_path / "build"), "9.0", target=str(tmp_path / "lib"), environ={})
    stage_source(plan)
    said = []
    outcome = run_build(plan, str(tmp_path / "build" / "apex_build.log"), say=said.append)
    assert outcome.returncode == 0, "\n".join(outcome.tail)
    built = sorted(f.split(".")[0] for f in os.listdir(tmp_path / "lib") if f.endswith(".so"))
    assert built == sorted(BENCH_EXTENSIONS)
    assert sorted(os.listdir(src)) == ["csrc", "setup.py"]
    assert sum(NARROW_MARK in line for line in said) == 1 and said[-1].endswith("Successfully installed apex-0.1")


def test_a_failed_clone_says_how_to_provide_apex_src(tmp_path):
    def offline(argv, **_):
        return subprocess.CompletedProcess(argv, 128, "", "fatal: unable to access 'https://github.com/NVIDIA/apex/'"
                                           ": Could not resolve host: github.com")
    with pytest.raises(ApexBuildError) as err:
        resolve_source(None, {}, str(tmp_path), run=offline)
    text = str(err.value)
    assert "could not clone https://github.com/NVIDIA/apex at 6424da3b" in text
    assert "Could not resolve host: github.com" in text and "APEX_SRC=/path/to/apex make apex" in text
    assert resolve_source(None, {"APEX_SRC": checkout(tmp_path)}, str(tmp_path), run=offline) == str(tmp_path / "apex")


# ------------------------------------------------------------------------------------------------ the commands
@pytest.fixture
def fake_machine(toolchain, monkeypatch):
    """`apex doctor/build` with the fresh-process probe replaced: before a build, then after it."""
    env = toolchain()
    probes = [env.probe, probe_of(apex={"status": "genuine", "distribution": GENUINE,
                                        "extensions": {"amp_C": SMOKED, "fused_layer_norm_cuda": SMOKED}})]
    monkeypatch.setattr(commands, "probe_in_fresh_process", lambda extra_path=None: probes.pop(0))
    monkeypatch.setattr(commands, "host_facts", lambda build_dir: env.host)
    return probes


def test_bad_src_is_exit_2_naming_the_field(capsys, tmp_path):
    assert cli.main(["apex", "build", "--src", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip() == (f"error: src={str(tmp_path / 'nope')!r}: must be an NVIDIA/apex "
                                               "checkout (a folder with setup.py)")


def test_doctor_json_lists_every_check(fake_machine, capsys):
    assert cli.main(["apex", "doctor", "--json"]) == 0  # warnings only
    checks = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in checks][:3] == ["torch", "GPU", "nvcc"]
    assert {c["verdict"] for c in checks} <= {"ok", "warn"}


def test_build_refuses_with_the_doctors_fix_lines(toolchain, monkeypatch, tmp_path, capsys):
    env = toolchain(nvcc="12.4")
    monkeypatch.setattr(commands, "probe_in_fresh_process", lambda extra_path=None: env.probe)
    monkeypatch.setattr(commands, "host_facts", lambda build_dir: env.host)
    assert cli.main(["apex", "build", "--src", checkout(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "refusing to build; fix these first:" in out
    assert "  nvcc: put the CUDA 13.0 toolkit's nvcc first on PATH" in out


def test_build_runs_the_plan_then_probes_the_result(fake_machine, monkeypatch, tmp_path, capsys):
    ran = []

    def fake_run(plan, log_path, say):
        ran.append(plan)
        say("[   40 s] compiling amp_C")
        return BuildOutcome(0, 41.0, log_path)
    monkeypatch.setattr(commands, "run_build", fake_run)
    assert cli.main(["apex", "build", "--src", checkout(tmp_path), "--build-dir", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert ran[0].env["TORCH_CUDA_ARCH_LIST"] == "9.0" and ran[0].extensions == BENCH_EXTENSIONS
    assert "building only apex_C, amp_C, fused_layer_norm_cuda (--full builds every extension)" in out
    assert "compiled and installed in 41 s" in out
    assert "Apex ready: genuine 0.1, 2/2 extensions smoke-tested on the GPU; total" in out


def test_build_says_when_the_narrowing_is_not_applied(fake_machine, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(commands, "run_build", lambda plan, log_path, say: BuildOutcome(1, 3.0, log_path, ("boom",)))
    src = checkout(tmp_path, UPSTREAM.replace('"apex_C"', '"flatten_C"'))
    assert cli.main(["apex", "build", "--src", src, "--build-dir", str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert ("narrowing NOT applied: upstream setup.py defines no extension named apex_C; running upstream's full "
            "build") in out
    assert "apex build FAILED (pip exit 1) after 3 s; full log:" in out
