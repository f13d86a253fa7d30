"""nvidia_ref.py - where the GPU tests find NVIDIA's NCCL and the GPUs.

nccl_dir(): the folder of NVIDIA's libnccl.so.2 from the nvidia-nccl Python
package (as PyTorch installs it), or None. gpu_count(): the GPUs
nvidia-smi lists (0 without one).
"""
import os
import subprocess
import sys


def nccl_dir():
    code = "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))"
    r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    d = r.stdout.strip()
    return d if r.returncode == 0 and os.path.exists(os.path.join(d, "libnccl.so.2")) else None


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU"))
