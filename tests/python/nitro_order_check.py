#!/usr/bin/python3
"""bench/lm_torch.py feeds PyTorch the windows in nitro's order: its replay of the training loader's
permutation (xoshiro256**, Fisher-Yates, the run seed's stream) must equal what nitro's loader hands
out, batch by batch, for several sizes, seeds and epochs.

    nitro_order_check.py PRINT_ORDER
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import nitro_order  # noqa: E402


def main():
    exe = sys.argv[1]
    m = nitro_order
    cases = [(10, 2, 1, 3), (1000, 8, 1, 2), (2337, 8, 7, 2), (97, 5, 123456789, 2)]
    failed = 0
    for n, batch, seed, epochs in cases:
        out = subprocess.run([exe, str(n), str(batch), str(seed), str(epochs)], capture_output=True, text=True, check=True).stdout
        lines = out.strip("\n").split("\n")
        assert len(lines) == epochs, out
        used = n // batch * batch  # whole batches only
        for e, line in enumerate(lines):
            got = [int(x) for x in line.split()]
            want = m.nitro_order(n, seed, e)[:used]
            ok = got == want
            failed += not ok
            print(f"{'ok' if ok else 'MISMATCH'}: {n} samples, batch {batch}, seed {seed}, epoch {e}: first {got[:6]} / {want[:6]}")
    # the replay is a permutation, and epochs differ
    assert sorted(m.nitro_order(50, 1, 0)) == list(range(50))
    assert m.nitro_order(50, 1, 0) != m.nitro_order(50, 1, 1)
    print(f"{sum(1 for c in cases for _ in range(c[3])) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
