"""The probe as a status board, and the install commands: judged through Probe.apex_reason only."""
from bench_core.machine.probe import Probe
from bench_core.machine.status_board import AMBER, GREEN, RED, install_commands, probe_board

GPU = {"torch": "2.11.0+cu130", "cuda_runtime": "13.0", "driver": "580", "nvcc": {"version": "13.0", "path": "/x"},
       "cuda": {"available": True, "device_count": 1, "name": "NVIDIA H200", "capability": [9, 0],
                "total_bytes": 150 * 2**30}}
EXT_OK = {"found": True, "loadable": True, "origin": "/a.so", "smoke": {"ok": True}}


def board(data):
    return {(r.section, r.item): r for r in probe_board(Probe.from_dict(data))}


def test_healthy_apex_is_green_and_gets_no_install_commands():
    data = {**GPU, "apex": {"status": "genuine", "distribution": {"version": "0.1", "summary": "NVIDIA"},
                            "extensions": {"amp_C": EXT_OK, "fused_layer_norm_cuda": EXT_OK},
                            "multi_tensor_apply_available": True}}
    rows = board(data)
    assert rows[("Apex", "amp_C")].state == GREEN and rows[("Apex", "Distribution")].state == GREEN
    assert Probe.from_dict(data).apex_healthy


def test_a_broken_extension_is_red_with_the_same_reason_the_levers_give():
    broken = {"found": True, "loadable": False, "error": "ImportError: undefined symbol _ZN3c10"}
    data = {**GPU, "apex": {"status": "genuine", "extensions": {"amp_C": broken, "fused_layer_norm_cuda": EXT_OK}}}
    probe = Probe.from_dict(data)
    row = board(data)[("Apex", "amp_C")]
    assert row.state == RED and row.detail == probe.apex_reason("amp_C")
    assert "undefined symbol" in row.detail and not probe.apex_healthy


def test_cpu_machine_says_no_gpu_and_offers_no_apex_build():
    data = {"torch": "2.13.0+cpu", "cuda_runtime": None, "cuda": {"available": False},
            "apex": {"status": "missing"}}
    rows = board(data)
    assert rows[("Machine", "GPU")].state == AMBER and "no CUDA device" in rows[("Machine", "GPU")].detail
    assert "CPU build" in rows[("Machine", "Versions")].detail and "None" not in rows[("Machine", "Versions")].detail
    assert "need a CUDA build of torch" in rows[("Apex", "Distribution")].detail
    assert install_commands(Probe.from_dict(data)) is None  # no TORCH_CUDA_ARCH_LIST guessed for a CPU


def test_install_commands_fill_in_this_gpu_and_warn_on_a_toolkit_mismatch():
    text = install_commands(Probe.from_dict({**GPU, "nvcc": {"version": "12.8", "path": "/usr/bin/nvcc"}}))
    assert 'TORCH_CUDA_ARCH_LIST="9.0"' in text and "refuses to build: nvcc 12.8 != torch CUDA 13.0" in text
