"""OpenMP's spin beside a GPU (tuner/openmp.py): set only where a GPU is present and the
user set no wait of their own, and in place before torch loads when the package is
imported."""

import os
import subprocess
import sys

from tuner.openmp import SPINS, keep_threads_warm


def test_beside_a_gpu_the_threads_spin(tmp_path):
    gpu = tmp_path / "nvidiactl"
    gpu.touch()
    environ: dict[str, str] = {}
    assert keep_threads_warm(environ, gpu)
    assert environ == {"GOMP_SPINCOUNT": SPINS}


def test_without_a_gpu_libgomps_default_stands(tmp_path):
    environ: dict[str, str] = {}
    assert not keep_threads_warm(environ, tmp_path / "no-gpu")
    assert environ == {}


def test_the_users_own_wait_is_kept(tmp_path):
    gpu = tmp_path / "nvidiactl"
    gpu.touch()
    for mine in ({"OMP_WAIT_POLICY": "PASSIVE"}, {"GOMP_SPINCOUNT": "0"}):
        environ = dict(mine)
        assert not keep_threads_warm(environ, gpu)
        assert environ == mine


def test_the_package_decides_before_torch_loads():
    """Importing tuner leaves torch unloaded, so libgomp reads the setting when it loads."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = ("import sys, tuner, tuner.openmp as o; "
            "print('torch' in sys.modules, o.NVIDIA.exists(), "
            "__import__('os').environ.get('GOMP_SPINCOUNT'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    gpu = out[1] == "True"
    assert out == ["False", str(gpu), SPINS if gpu else "None"]
