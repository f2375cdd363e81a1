#!/usr/bin/env python3
"""gen.py - remake the accountant's test vectors (tests/rdp-vectors/opacus.txt).

The figures are Opacus' (PyPI opacus, its RDPAccountant and
get_noise_multiplier at their defaults), an implementation independent of
lib/core/rdp.c; tests/unit/test_rdp reads the stored file and holds cg's
figures to them.  Python and Opacus are needed only to remake it:

    pip install opacus
    python3 tests/rdp-vectors/gen.py > tests/rdp-vectors/opacus.txt

The grid: noise multipliers sigma from 0.5 to 10, sampling rates q from 1
(every worker in every round: the federated case) down to 0.004, from 1 to
10^4 releases (3: the rounds tests/096-dp.bats runs), delta 1e-5 (and 1e-6 on a few rows).  One check per line:

    eps Q SIGMA STEPS DELTA EPSILON    Opacus' epsilon of STEPS releases
    sigma Q EPSILON STEPS DELTA SIGMA  get_noise_multiplier's sigma for
                                       that budget (its search stops
                                       within 0.01 of EPSILON, above
                                       the least sigma)
"""
import opacus
from opacus.accountants import RDPAccountant
from opacus.accountants.utils import get_noise_multiplier


def eps(q, sigma, steps, delta):
    a = RDPAccountant()
    a.history = [(sigma, q, steps)]
    return a.get_epsilon(delta=delta)


def main():
    print(f"# Opacus {opacus.__version__}: tests/rdp-vectors/gen.py")
    for q in (1.0, 0.5, 0.1, 0.01, 0.004):
        for sigma in (0.5, 0.8, 1.0, 1.5, 2.0, 4.0, 10.0):
            for steps in (1, 3, 10, 100, 1000, 10000):
                for delta in (1e-5,) if sigma not in (1.0, 4.0) else (1e-5, 1e-6):
                    print(f"eps {q!r} {sigma!r} {steps} {delta!r} "
                          f"{eps(q, sigma, steps, delta)!r}")
    for q, e, steps in ((1.0, 8.0, 10), (1.0, 8.0, 100), (1.0, 1.0, 10),
                        (0.1, 8.0, 100), (0.04, 8.0, 2250),
                        (0.004, 2.0, 10000), (0.01, 4.0, 1000)):
        s = get_noise_multiplier(target_epsilon=e, target_delta=1e-5,
                                 sample_rate=q, steps=steps)
        print(f"sigma {q!r} {e!r} {steps} 1e-05 {s!r}")


if __name__ == "__main__":
    main()
