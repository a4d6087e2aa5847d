"""nitro's training order in Python: the permutation nitro's loader hands out in epoch e of a run
seeded `seed` (core/rng.hpp: xoshiro256** seeded by splitmix64, Fisher-Yates with Lemire's bounded
draws; data/loader.hpp: epoch e's stream is fold(train_order_seed(seed), e)), bit for bit, so that
another framework can be fed the same batches (bench/lm_torch.py). tests/python/nitro_order_check.py
holds it to the loader.
"""

M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def fold(seed, i):
    return splitmix64(seed ^ splitmix64((i + 0x632BE59BD9B4E019) & M64))


class Xoshiro:  # nitro::rng: xoshiro256** seeded by splitmix64
    def __init__(self, seed):
        self.s, x = [], seed
        for _ in range(4):
            x = splitmix64(x)
            self.s.append(x)

    def __call__(self):
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M64
        r = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return r

    def below(self, n):  # Lemire's method with rejection, as nitro::rng::below
        m = self() * n
        low = m & M64
        if low < n:
            t = ((1 << 64) - n) % n
            while low < t:
                m = self() * n
                low = m & M64
        return m >> 64


def nitro_order(n, seed, epoch):
    """The permutation of n samples nitro's training loader uses in `epoch` (from 0) of a run seeded `seed`."""
    g, order = Xoshiro(fold(fold(seed, 2), epoch)), list(range(n))
    for i in range(n - 1, 0, -1):
        j = g.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return order
