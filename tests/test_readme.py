"""The README is a front door: one screen, what it is, the two commands, the answer card, links to the rest."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCREEN_LINES = 40   # a laptop screen of rendered markdown; the rest lives in docs/


def test_the_readme_fits_one_screen_and_names_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= SCREEN_LINES, f"README.md has {len(text.splitlines())} lines, over one screen"
    commands = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    assert [c.split()[:2] for c in commands] == [["make", "app"], ["make", "test"]]
    assert "PORT=" in text and "torch==2.13.0" in text and "nvidia-smi" in text
    assert "docs/screenshots/answer_card_1440.png" in text


def test_the_readme_links_to_the_docs_that_hold_the_rest():
    text = (ROOT / "README.md").read_text()
    for doc in ("GUIDE", "METHOD", "APEX", "CLUSTER", "LAYOUT"):
        assert f"](docs/{doc}.md)" in text and (ROOT / "docs" / f"{doc}.md").exists(), doc


def test_make_app_installs_the_tests_cpu_torch_without_a_driver_and_cuda_torch_with_one(tmp_path):
    """`make -n`: no NVIDIA driver on PATH gives the pinned CPU build from the CPU index (the pin deps-test uses);
    a driver gives requirements.txt's range (PyPI's CUDA build)."""
    import os
    import shutil
    import subprocess
    make = shutil.which("make")
    assert make, "make is needed to read the Makefile's plan"
    bare = tmp_path / "bare"
    bare.mkdir()
    for tool in ("sh", "python3", "command"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bare / tool)
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (driver / "nvidia-smi").chmod(0o755)

    def plan(target: str, path: str) -> str:
        return subprocess.run([make, "-n", "-B", target], cwd=ROOT, capture_output=True, text=True,
                              env={**{k: v for k, v in os.environ.items() if k != "TORCH_CPU_INDEX"}, "PATH": path},
                              check=True).stdout
    cpu_app, cpu_test = plan("deps-app", str(bare)), plan("deps-test", str(bare))
    assert "--no-deps torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu" in cpu_app
    assert "--no-deps torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu" in cpu_test
    gpu_app = plan("deps-app", f"{driver}:{bare}")
    assert 'torch>=2.4' in gpu_app and "whl/cpu" not in gpu_app
