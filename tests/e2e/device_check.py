#!/usr/bin/python3
"""--set device=cuda through the command line of a trainer nvcc built with the CUDA backend.

    device_check.py WORK BIN

The run must reach the CUDA backend: on a machine without a GPU it ends, before its first step,
with E-CUDA-002 (no CUDA device) and exit 2, its record saying failed with that error; on a machine
with one it finishes, and its manifest records the backend as cuda and the device as cuda:0 (an
override). A trainer that ran on the CPU instead, or refused the choice (E-CUDA-015), fails. `check --set
device=cuda` must reach the same backend: E-CUDA-002 without a GPU, else its one batch per split
on the GPU, its table naming the cuda backend.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys


def check_on_device(work, exe, gpu):
    """check --set device=cuda: the batches on the CUDA backend (no GPU: E-CUDA-002), nothing written."""
    cmd = [exe, "check", "--variant", "smoke", "--set", "device=cuda"]
    before = sorted(os.listdir(work))
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    if sorted(os.listdir(work)) != before:
        sys.exit(f"{' '.join(cmd)} wrote files in {work}")
    if not gpu:
        if p.returncode != 2 or "E-CUDA-002" not in p.stderr:
            sys.exit(f"{' '.join(cmd)} exited {p.returncode} on a machine without a GPU, not 2 with E-CUDA-002 "
                     f"(a check on the CPU would pass here)\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        print("check --set device=cuda reached the CUDA backend too (E-CUDA-002, exit 2)")
        return
    if p.returncode != 0 or not re.search(r"^  backend +cuda \(cuda:0\)$", p.stdout, re.M):
        sys.exit(f"{' '.join(cmd)} exited {p.returncode} without a cuda backend row\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    print("check --set device=cuda ran its batches on the GPU")


def main():
    work, exe = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cmd = [exe, "run", "--variant", "smoke", "--steps", "20", "--set", "device=cuda", "--quiet",
           "--run-dir", os.path.join(work, "runs"), "--id", "gpu"]
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    manifests = glob.glob(os.path.join(work, "runs", "*-gpu", "manifest.json"))
    if len(manifests) != 1:
        sys.exit(f"{' '.join(cmd)} wrote {len(manifests)} manifests (exit {p.returncode})\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    with open(manifests[0]) as f:
        m = json.load(f)
    with open(os.path.join(os.path.dirname(manifests[0]), "status.json")) as f:
        status = json.load(f)
    device = m.get("run_keywords", {}).get("device", {})
    if device != {"value": "cuda:0", "source": "override"}:
        sys.exit(f"the manifest records the device as {device}, not cuda:0 from the override")
    if m.get("selection", {}).get("overrides", {}).get("device") != "cuda:0":
        sys.exit(f"the manifest's selection does not hold the device: {m.get('selection')}")
    if p.returncode == 2 and "E-CUDA-002" in p.stderr:
        if status.get("state") != "failed" or "E-CUDA-002" not in status.get("error", ""):
            sys.exit(f"the run failed with E-CUDA-002, but its status.json says {status}")
        print("no GPU here: the run reached the CUDA backend, which found no device (E-CUDA-002, exit 2), and recorded so")
        check_on_device(work, exe, False)
        return
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    if m.get("backend", {}).get("name") != "cuda" or status.get("state") != "finished":
        sys.exit(f"the run finished on {m.get('backend')} with state {status.get('state')}, not on cuda")
    print(f"trained on the GPU: {status.get('step')} steps, backend {m.get('backend')}")
    check_on_device(work, exe, True)


if __name__ == "__main__":
    main()
