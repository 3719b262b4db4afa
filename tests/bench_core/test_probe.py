import os
import textwrap

from bench_core.probe import run_probe


def test_probe_without_apex(cpu_probe):
    assert cpu_probe["torch"] and cpu_probe["cuda"]["available"] is False
    assert cpu_probe["apex"]["status"] == "missing"
    assert cpu_probe["adam_fused"]["cpu"] is True and cpu_probe["bf16"]["cpu"] is True
    assert set(cpu_probe["sdpa"]) >= {"flash", "mem_efficient", "math"}
    assert "usable" in cpu_probe["compile"]["cpu"]


def fake_package(tmp_path, summary, version, ext_source=None):
    pkg = tmp_path / "apex"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    info = tmp_path / f"apex-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: apex\nVersion: {version}\nSummary: {summary}\n")
    if ext_source is not None:
        (tmp_path / "amp_C.py").write_text(textwrap.dedent(ext_source))
    return {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_probe_detects_an_impostor(tmp_path):
    env = fake_package(tmp_path, "Rapid prototyping toolkit for Pyramid", "0.9.10dev")
    apex = run_probe(env=env)["apex"]
    assert apex["status"] == "impostor"
    assert apex["distribution"] == {"name": "apex", "version": "0.9.10dev",
                                    "summary": "Rapid prototyping toolkit for Pyramid"}


def test_probe_reports_a_broken_extension(tmp_path):
    env = fake_package(tmp_path, "PyTorch Extensions written by NVIDIA", "0.1",
                       ext_source="raise ImportError('undefined symbol: _ZN3c104cuda9SetDeviceEi')")
    apex = run_probe(env=env)["apex"]
    assert apex["status"] == "genuine"
    amp = apex["extensions"]["amp_C"]
    assert amp["found"] and not amp["loadable"] and "undefined symbol" in amp["error"]
    assert apex["extensions"]["fused_layer_norm_cuda"]["found"] is False
