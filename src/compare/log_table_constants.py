#!/usr/bin/env python3
"""Computes the constants of LogTable in simd.h (Python standard library only, 80-digit decimal
arithmetic) and prints them as C++ hex literals with the polynomial's worst relative error.

The reduction: m = 2^e f with f in [31/32, 31/16), split into eight pieces, each with a centre
c_k = 1 + k/8 (piece 0 is [31/32, 17/16) and its centre is exactly 1, so log(1) = 0 exactly and
log is relatively accurate near 1). r = (f - c) * RN(1/c) (f - c is exact) lies in [-1/18, 1/16];
log m = e ln2 + log(c) + log1p(r), log(c) tabled in two parts, log1p(r) = r g(r) with g the
degree-10 Chebyshev interpolant of log1p(r)/r on that interval.

usage: python3 src/compare/log_table_constants.py [--check simd.h]
--check: exit 1 unless every constant (as a hex literal) appears in that file (a ctest).
"""
import sys
from decimal import Decimal, getcontext

getcontext().prec = 80
DEGREE = 10
LO, HI = Decimal(-1) / 18, Decimal(1) / 16


def cos(x):
    """cos by its Taylor series (|x| <= pi here; 80 digits)."""
    term, total, k = Decimal(1), Decimal(1), 0
    while abs(term) > Decimal(10) ** -90:
        k += 2
        term *= -x * x / (k * (k - 1))
        total += term
    return total


def pi():
    """pi by Machin's formula."""
    def atan_inv(n):
        x, total, k, sign = Decimal(1) / n, Decimal(0), 1, 1
        power = x
        while power > Decimal(10) ** -90:
            total += sign * power / k
            power *= x * x
            k += 2
            sign = -sign
        return total
    return 16 * atan_inv(5) - 4 * atan_inv(239)


def h(r):
    return (1 + r).ln() / r


def solve(a, b):
    """Gaussian elimination with partial pivoting."""
    n = len(b)
    a = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda i: abs(a[i][c]))
        a[c], a[p] = a[p], a[c]
        for i in range(c + 1, n):
            f = a[i][c] / a[c][c]
            for j in range(c, n + 1):
                a[i][j] -= f * a[c][j]
    x = [Decimal(0)] * n
    for i in reversed(range(n)):
        x[i] = (a[i][n] - sum(a[i][j] * x[j] for j in range(i + 1, n))) / a[i][i]
    return x


def main():
    check = sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "--check" else None
    mid, half, p = (LO + HI) / 2, (HI - LO) / 2, pi()
    nodes = [mid + half * cos(p * (2 * i + 1) / (2 * (DEGREE + 1))) for i in range(DEGREE + 1)]
    coeffs = solve([[x ** j for j in range(DEGREE + 1)] for x in nodes], [h(x) for x in nodes])
    rounded = [Decimal(float(c)) for c in coeffs]
    worst = Decimal(0)
    steps = 4000
    for i in range(steps + 1):
        r = LO + (HI - LO) * i / steps
        if r == 0:
            continue
        g = Decimal(0)
        for c in reversed(rounded):
            g = g * r + c
        worst = max(worst, abs(r * g / (1 + r).ln() - 1))
    print("// g, highest degree first (Horner):")
    print(", ".join(float(c).hex() for c in reversed(rounded)))
    print("// worst relative error of r g(r) against log1p(r) on [-1/18, 1/16]: %.2e" % worst)
    inv_c = [float(1 / (1 + Decimal(k) / 8)) for k in range(8)]
    log_c = [(1 + Decimal(k) / 8).ln() for k in range(8)]
    hi = [float(v) for v in log_c]
    lo = [float(v - Decimal(h_)) for v, h_ in zip(log_c, hi)]
    print("kC:", ", ".join((1 + k / 8).hex() for k in range(8)))
    print("kInvC:", ", ".join(v.hex() for v in inv_c))
    print("kLogCHi:", ", ".join(v.hex() for v in hi))
    print("kLogCLo:", ", ".join(v.hex() for v in lo))
    if check:
        text = open(check).read()
        wanted = [float(c) for c in rounded] + inv_c + hi + lo
        missing = [v.hex() for v in wanted if v != 0 and abs(v) != 1 and v.hex().lstrip("-") not in text]
        if missing:
            print("%s: constants missing or different: %s" % (check, ", ".join(missing)))
            return 1
        print("%s: all %d constants present" % (check, len(wanted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
