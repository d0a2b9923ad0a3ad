"""Vectorisable scalar math for the Numba kernels the CPU backend generates.

Inside a Numba loop ``np.exp`` and friends call scalar libm (the pip llvmlite has no
SVML), which stops LLVM from vectorising the loop: such kernels run ~5x slower than
NumPy. The functions here are written as range reduction + polynomial with bit-casts
for the exponent and selects instead of branches, so that after inlining a plain
``for i in range(n): out[i] = f(x[i])`` loop vectorises (``<16 x float>`` on AVX-512).

Use: ``MATH[op][dtype_name]`` is the function for that op and dtype, e.g.
``MATH["exp"]["float32"] is exp_f32``; each is also a module attribute named
``<op>_f32`` / ``<op>_f64`` (``pow_*`` for ``power``, which takes two arguments) for
generated source to import. Ops: exp exp2 expm1 log log2 log10 log1p tanh sigmoid
sin cos tan erf sinh cosh arctan power. A kernel calls each as an intrinsic, compiled
once per process and inlined by LLVM into the kernel's loop (LLVM must see the whole
loop body to vectorise it; see the end of this module). The generated code calls them
on values already cast to the op's result dtype (float32 or float64), and must be
compiled without ``fastmath`` (inlined code takes the caller's flags): the algorithms
rely on IEEE semantics (NaN propagation, exact Cody-Waite products, error-free
transformations), and with ``fastmath=True`` exp returns garbage for NaN and infinities.
Division goes through an intrinsic, so the caller's ``error_model`` does not matter.

Accuracy against NumPy / SciPy (``bench/ulp_report.py`` measures it): within 4 ULP,
with the same special values (NaN, +-inf, signed zeros; subnormal results where NumPy
rounds them, not flushes). erf and power in float32 evaluate the float64 version and
round, sin, cos and tan work in double; the others have native float32 versions.
sin, cos and tan reduce their argument with a Cody-Waite split of pi/2 (four parts
for float64, two for float32), exact for ``|x| < TRIG_MAX = 2**20 * pi/2`` (about
1.6e6); beyond that they return NaN rather than a wrong number (NumPy is exact
there), so a caller that may see larger arguments must fall back to NumPy. (A
Payne-Hanek reduction with a table of 2/pi, exact for every float32, measured several
times slower on Zen 4 because of the gathers.)

Polynomials are Chebyshev fits (near-minimax, computed with mpmath at 50 digits) of
the stated remainder function on the stated interval, coefficients highest degree
first. Constants split as hi + lo have a high part with enough trailing zero bits
that multiplying it by the reduced integer is exact.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_SAME_WIDTH = {
    types.float32: types.int32,
    types.float64: types.int64,
    types.int32: types.float32,
    types.int64: types.float64,
}


@intrinsic
def _cast_bits(typingctx, x):
    """Reinterpret a float as the integer of the same width, or back (an LLVM bitcast)."""
    if x not in _SAME_WIDTH:
        return None
    to = _SAME_WIDTH[x]

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(to))

    return to(x), codegen


def _llvm_ternary(name):
    def typer(typingctx, a, b, c):
        if not (a == b == c and a in (types.float32, types.float64)):
            return None

        def codegen(context, builder, signature, args):
            t = args[0].type
            fn = builder.module.declare_intrinsic(name, [t], ir.FunctionType(t, [t, t, t]))
            return builder.call(fn, args)

        return a(a, a, a), codegen

    return intrinsic(typer)


@intrinsic
def _div(typingctx, a, b):
    """IEEE a / b: inf or NaN on zero divisors whatever the caller's error_model."""
    if not (a == b and a in (types.float32, types.float64)):
        return None

    def codegen(context, builder, signature, args):
        return builder.fdiv(*args)

    return a(a, b), codegen


# a*b+c, fused where the CPU has FMA (twice the polynomial throughput) and two
# roundings where it has not; nothing below depends on which.
_madd = _llvm_ternary("llvm.fmuladd")
# a*b+c with one rounding, always: the error-free products of pow and erf need it.
_fma = _llvm_ternary("llvm.fma")


@intrinsic
def _horner(typingctx, x, c):
    """c[0]*x**(n-1) + ... + c[n-1] by Horner's rule with fmuladd, unrolled when compiled.

    (A Python loop over the tuple is not always unrolled by LLVM, and then not vectorised.)
    """
    if not (isinstance(c, types.UniTuple) and c.dtype == x):
        return None

    def codegen(context, builder, signature, args):
        xv, cv = args
        t = xv.type
        fn = builder.module.declare_intrinsic("llvm.fmuladd", [t], ir.FunctionType(t, [t, t, t]))
        p = builder.extract_value(cv, 0)
        for k in range(1, c.count):
            p = builder.call(fn, [p, xv, builder.extract_value(cv, k)])
        return p

    return x(x, c), codegen


@intrinsic
def _ldexp(typingctx, x, n):
    """x * 2**n rounded once (LLVM's ldexp: one ``vscalefps`` per vector on AVX-512)."""
    if not (x in (types.float32, types.float64) and n in (types.int32, types.int64)):
        return None

    def codegen(context, builder, signature, args):
        t, nt = args[0].type, args[1].type
        fn = builder.module.declare_intrinsic("llvm.ldexp", [t, nt], ir.FunctionType(t, [t, nt]))
        return builder.call(fn, args)

    return x(x, n), codegen


def _hardware_ldexp() -> bool:
    """Whether LLVM lowers a vector ldexp to one instruction here: AVX-512 (elsewhere: a
    libm call per element, which would stop the loop from vectorising), and an LLVM that
    has the ``llvm.ldexp`` intrinsic (17 and later; Numba 0.60's llvmlite has LLVM 14,
    where the intrinsic would be an unresolved function)."""
    from llvmlite import binding

    return (binding.llvm_version_info >= (17,)
            and "+avx512f" in binding.get_host_cpu_features().flatten().split(","))


_HW_LDEXP = _hardware_ldexp()
_inline = njit(inline="always")


@_inline
def _two_prod(a, b):
    p = a * b
    return p, _fma(a, b, -p)


@_inline
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@_inline
def _fast_two_sum(a, b):
    """Exact sum as hi + lo, valid when |a| >= |b|."""
    s = a + b
    return s, b - (s - a)


def _fp(ft, values):
    return tuple(ft(v) for v in values)


def _split(v, bits):
    """float32 (hi, lo) with hi = v rounded to `bits` significant bits, lo = v - hi."""
    e = np.frexp(v)[1]
    hi = np.ldexp(np.round(np.ldexp(v, bits - e)), e - bits)
    return np.float32(hi), np.float32(v - hi)


# ---------------------------------------------------------------- exp family, log

# expm1(r) = r + r^2/2 + r^3 Q(r), |r| <= ln2/2; Q fitted on [-0.3486, 0.3486].
_EM = {
    np.float64: (
        2.091163436406729e-09, 2.5100942452990102e-08, 2.7557282128549636e-07,
        2.7557267282324437e-06, 2.4801587317688873e-05, 0.00019841269863815915,
        0.0013888888888886443, 0.008333333333329909, 0.041666666666666664,
        0.16666666666666669,
    ),
    np.float32: (0.00019883177, 0.0013926614, 0.008333321, 0.041666552, 0.16666667),
}
# float32 exp(r) = 1 + r E(r), |r| <= ln2/2: one multiply-add fewer than 1 + expm1(r)
# (weighted minimax of the relative error of exp).
_EXP32 = (0.008290272, 0.04189816, 0.16667639, 0.49999148, 0.9999997)
# log(1+f) = 2 atanh(s), s = f/(2+f); (2 atanh(s) - 2s)/s = z T(z), z = s^2 in
# [0, 0.1716^2] (f in [sqrt(1/2)-1, sqrt(2)-1]).
_LG = {
    np.float64: (
        0.14618236865830497, 0.15331576916675838, 0.18182893480846, 0.2222221107497463,
        0.2857142862634218, 0.39999999999898694, 0.666666666666667,
    ),
    np.float32: (0.29581314, 0.3998875, 0.66666687),
}
# arctan(t) = t + t^3 A(t^2) for |t| <= 0.66, A fitted on [0, 0.66^2].
_ATAN = {
    np.float64: (
        -0.0022326669981549236, 0.009709111172569033, -0.021241381221869606,
        0.03243886102654115, -0.040782825289926036, 0.04690591493031964,
        -0.05249238937907004, 0.05880372680628488, -0.06666465506565467,
        0.07692293573203952, -0.09090908440295399, 0.11111111092970424, -0.1428571428544832,
        0.19999999999998455, -0.3333333333333333,
    ),
    np.float32: (
        -0.020599352, 0.055691186, -0.08536328, 0.11032312, -0.14280216, 0.19999853, -0.3333333,
    ),
}


def _make(ft):
    """The functions with a native implementation in `ft` (float32 or float64)."""
    it = np.int32 if ft is np.float32 else np.int64
    mant = it(np.finfo(ft).nmant)
    bias = it(np.finfo(ft).maxexp - 1)
    one_bits = it(bias << mant)
    mant_mask = it((1 << mant) - 1)
    sign_mask = ~it(np.iinfo(it).max)
    shifter = ft(1.5 * 2.0**mant)  # x + shifter rounds x to an integer held in the low bits
    shifter_bits = it(np.array(shifter).view(it))
    sqrt_half_bits = it(np.array(np.sqrt(ft(0.5))).view(it))
    tiny = np.finfo(ft).smallest_normal
    sub_scale, sub_exp = ft(2.0 ** (mant + 2)), it(mant + 2)
    inf, nan = ft(np.inf), ft(np.nan)
    zero, half, one, two = ft(0), ft(0.5), ft(1), ft(2)
    log2e = ft(1.4426950408889634)
    if ft is np.float32:
        ln2_hi, ln2_lo = ft(0.693145751953125), ft(1.4286068203094173e-06)
        # hi parts of 1/ln2, 1/ln10 with 12 bits (times the 12-bit masked log: exact),
        # of log10(2) with 16 bits (times k <= 150: exact)
        ivln2 = _split(1.4426950408889634, 12)
        ivln10 = _split(0.4342944819032518, 12)
        log10_2 = _split(0.30102999566398120, 16)
        hi_mask = it(-(1 << 12))
        exp_hi, exp_lo, exp2_hi, exp2_lo, expm1_lo = ft(89), ft(-110), ft(129), ft(-160), ft(-20)
    else:
        ln2_hi, ln2_lo = ft(0.6931471805598903), ft(5.497923018708371e-14)
        ivln2 = ft(1.4426950407214463), ft(1.6751713164886512e-10)  # 32 + 53 bits
        ivln10 = ft(0.4342944818781689), ft(2.5082946711645275e-11)  # 32 + 53 bits
        log10_2 = ft(0.30102999566395283), ft(2.8363394551044964e-14)  # 42 + 53 bits
        hi_mask = it(-(1 << 32))
        exp_hi, exp_lo, exp2_hi, exp2_lo, expm1_lo = ft(710), ft(-750), ft(1025), ft(-1080), ft(-40)
    em_poly = _fp(ft, _EM[ft])
    exp_poly = _fp(ft, _EXP32) if ft is np.float32 else None
    lg_poly = _fp(ft, _LG[ft])
    atan_poly = _fp(ft, _ATAN[ft])
    # pi/2 and pi/4 as hi + lo (the double's own rounding error added back)
    pio2 = ft(np.pi / 2), ft((np.pi / 2 - ft(np.pi / 2)) + 6.123233995736766e-17)
    pio4 = ft(np.pi / 4), ft((np.pi / 4 - ft(np.pi / 4)) + 3.061616997868383e-17)
    # sinh/cosh use exp(|x|)/2 alone past this (e^-2|x| below half an ULP)
    hyp_cut = ft(9) if ft is np.float32 else ft(20)
    quarter = ft(0.25)
    tanh_sat = ft(20) if ft is np.float32 else ft(44)  # 2|x| past which tanh rounds to 1
    # arctan: a <= 0.66 directly, up to tan(3pi/8) as pi/4 + arctan((a-1)/(a+1)), past it
    # as pi/2 - arctan(1/a): the reduced argument stays small against the result
    atan_mid, atan_big = ft(0.66), ft(np.sqrt(2) + 1)
    ln2 = ft(np.log(2.0))

    @_inline
    def pow2(n):
        """2**n for an integer n in the normal exponent range."""
        return _cast_bits(it((n + bias) << mant))

    if _HW_LDEXP:

        @_inline
        def scale(p, n):
            """p * 2**n, rounded once even when the result is subnormal or overflows."""
            return _ldexp(p, n)

    else:

        @_inline
        def scale(p, n):
            """p * 2**n, rounded once even when the result is subnormal or overflows."""
            n1 = it(n >> 1)
            return p * pow2(n1) * pow2(it(n - n1))

    @_inline
    def expm1_poly(r):
        return _madd(r * r, _madd(r, _horner(r, em_poly), half), r)

    @_inline
    def reduce_ln2(x):
        """x = n*ln2 + r with |r| <= ln2/2 (x already clamped)."""
        t = _madd(x, log2e, shifter)
        nf = t - shifter
        r = _madd(nf, -ln2_hi, x)  # exact, fused or not
        return it(_cast_bits(t) - shifter_bits), _madd(nf, -ln2_lo, r)

    if exp_poly is None:

        @_inline
        def exp_poly_r(r):
            return one + expm1_poly(r)

    else:

        @_inline
        def exp_poly_r(r):
            return _madd(r, _horner(r, exp_poly), one)

    @_inline
    def exp(x):
        xc = exp_hi if x > exp_hi else x
        xc = exp_lo if xc < exp_lo else xc
        n, r = reduce_ln2(xc)
        return scale(exp_poly_r(r), n)

    @_inline
    def exp2(x):
        xc = exp2_hi if x > exp2_hi else x
        xc = exp2_lo if xc < exp2_lo else xc
        t = xc + shifter
        nf = t - shifter
        n = it(_cast_bits(t) - shifter_bits)
        return scale(one + expm1_poly((xc - nf) * ln2), n)

    @_inline
    def expm1(x):
        xc = exp_hi if x > exp_hi else x
        xc = expm1_lo if xc < expm1_lo else xc
        n, r = reduce_ln2(xc)
        e = expm1_poly(r)
        s = pow2(n if n < mant else mant)
        res = _madd(e, s, s - one) if n < mant else scale(one + e, n) - one
        return x if x == zero else res

    @_inline
    def log_reduce(x):
        """x = 2**k * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)), x > 0 and finite."""
        sub = x < tiny
        ix = _cast_bits(x * sub_scale if sub else x)
        ix = it(ix + (one_bits - sqrt_half_bits))
        k = it(it(ix >> mant) - bias)
        k = it(k - sub_exp) if sub else k
        m = _cast_bits(it(it(ix & mant_mask) + sqrt_half_bits))
        return k, m - one

    @_inline
    def log1p_parts(f):
        """log(1+f) = f - hfsq + tail, the three parts kept apart for extra precision."""
        s = _div(f, two + f)
        z = s * s
        hfsq = half * f * f
        return hfsq, s * (hfsq + z * _horner(z, lg_poly))

    @_inline
    def log_special(x, res):
        res = x if x == inf else res
        res = -inf if x == zero else res
        return nan if (x < zero or x != x) else res

    @_inline
    def log(x):
        k, f = log_reduce(x)
        kf = ft(k)
        hfsq, tail = log1p_parts(f)
        res = kf * ln2_hi - ((hfsq - (tail + kf * ln2_lo)) - f)
        return log_special(x, res)

    @_inline
    def log_hi_lo(x):
        """log(x) = k*ln2 + hi + lo, hi with few enough bits that hi*ivln2[0] is exact."""
        k, f = log_reduce(x)
        hfsq, tail = log1p_parts(f)
        hi = _cast_bits(it(_cast_bits(f - hfsq) & hi_mask))
        return ft(k), hi, (f - hi) - hfsq + tail

    @_inline
    def log2(x):
        kf, hi, lo = log_hi_lo(x)
        val_hi = hi * ivln2[0]
        val_lo = (lo + hi) * ivln2[1] + lo * ivln2[0]
        w = kf + val_hi
        val_lo += (kf - w) + val_hi
        return log_special(x, val_lo + w)

    @_inline
    def log10(x):
        kf, hi, lo = log_hi_lo(x)
        val_hi = hi * ivln10[0]
        val_lo = (lo + hi) * ivln10[1] + lo * ivln10[0]
        y = kf * log10_2[0]
        w = y + val_hi
        val_lo += kf * log10_2[1] + ((y - w) + val_hi)
        return log_special(x, val_lo + w)

    @_inline
    def log1p(x):
        u = one + x
        k, f = log_reduce(u)
        # the rounding error of 1 + x, relative to u
        c = _div((one - (u - x)) if k > 0 else (x - (u - one)), u)
        kf = ft(k)
        hfsq, tail = log1p_parts(f)
        res = kf * ln2_hi - ((hfsq - (tail + (kf * ln2_lo + c))) - f)
        res = x if (x == zero or x == inf) else res
        res = -inf if x == -one else res
        return nan if (x < -one or x != x) else res

    @_inline
    def copysign(mag, sgn):
        return _cast_bits(it(_cast_bits(mag) | it(_cast_bits(sgn) & sign_mask)))

    @_inline
    def exp_parts(a):
        """expm1(a) (for a < hyp_cut) and exp(a)/2 (overflowing only where it does)."""
        xc = exp_hi + one if a > exp_hi + one else a
        n, r = reduce_ln2(xc)
        e = expm1_poly(r)
        s = pow2(n if n < mant else mant)
        return _madd(e, s, s - one), scale(one + e, it(n - 1))

    @_inline
    def sinh(x):
        a = abs(x)
        em, h = exp_parts(a)
        small = half * (em + _div(em, em + one))
        return copysign(small if a < hyp_cut else h, x)

    @_inline
    def cosh(x):
        a = abs(x)
        em, h = exp_parts(a)
        res = h + _div(quarter, h)
        return one + _div(em * em, two * (one + em)) if a < half * ln2 else res

    @_inline
    def arctan(x):
        a = abs(x)
        mid = a > atan_mid
        big = a > atan_big
        t = _div((-one if big else a - one) if mid else a, (a if big else a + one) if mid else one)
        z = t * t
        y_hi = (pio2[0] if big else pio4[0]) if mid else zero
        y_lo = (pio2[1] if big else pio4[1]) if mid else zero
        return copysign(y_hi + (t + _madd(t * z, _horner(z, atan_poly), y_lo)), x)

    @_inline
    def tanh(x):
        """E / (E + 2) with E = expm1(2|x|): no cancellation near 0, so no second branch.
        E = (2**n - 1) + 2**n expm1(r) directly: where 2**n - 1 rounds (n past the
        mantissa), E's relative error is still one rounding, which tanh = 1 - 2/(E + 2)
        scales down below half an ULP."""
        t = two * abs(x)
        n, r = reduce_ln2(tanh_sat if t > tanh_sat else t)
        s = pow2(n)
        e = _madd(expm1_poly(r), s, s - one)
        return copysign(_div(e, e + two), x)

    @_inline
    def sigmoid(x):
        t = exp(-abs(x))
        return _div(one if x >= zero else t, one + t)

    return {
        "exp": exp, "exp2": exp2, "expm1": expm1, "log": log, "log2": log2, "log10": log10,
        "log1p": log1p, "tanh": tanh, "sigmoid": sigmoid, "sinh": sinh, "cosh": cosh,
        "arctan": arctan, "_log_reduce": log_reduce,
        "_exp_reduce": reduce_ln2, "_expm1_poly": expm1_poly, "_scale": scale,
        "_copysign": copysign,
    }


_N32 = _make(np.float32)
_N64 = _make(np.float64)

exp_f32, exp2_f32, expm1_f32, log_f32 = (_N32[k] for k in ("exp", "exp2", "expm1", "log"))
log2_f32, log10_f32, log1p_f32 = _N32["log2"], _N32["log10"], _N32["log1p"]
tanh_f32, sigmoid_f32 = _N32["tanh"], _N32["sigmoid"]
sinh_f32, cosh_f32, arctan_f32 = _N32["sinh"], _N32["cosh"], _N32["arctan"]
exp_f64, exp2_f64, expm1_f64, log_f64 = (_N64[k] for k in ("exp", "exp2", "expm1", "log"))
log2_f64, log10_f64, log1p_f64 = _N64["log2"], _N64["log10"], _N64["log1p"]
tanh_f64, sigmoid_f64 = _N64["tanh"], _N64["sigmoid"]
sinh_f64, cosh_f64, arctan_f64 = _N64["sinh"], _N64["cosh"], _N64["arctan"]

_log_reduce = _N64["_log_reduce"]
_exp_reduce = _N64["_exp_reduce"]
_expm1_poly = _N64["_expm1_poly"]
_scale = _N64["_scale"]
_copysign = _N64["_copysign"]

_INF, _NAN = np.inf, np.nan


# ---------------------------------------------------------------- sin, cos, tan

# sin(r) = r + r^3 S(r^2), cos(r) = 1 - r^2/2 + r^4 C(r^2), |r| <= pi/4 (fit to 0.7854).
_SIN = (
    1.5918114606960158e-10, -2.505113164112472e-08, 2.755731610157416e-06,
    -0.00019841269836756687, 0.008333333333330948, -0.16666666666666666,
)
_COS = (
    -1.1382623236895382e-11, 2.087614614085923e-09, -2.7557317271117796e-07,
    2.4801587298764507e-05, -0.0013888888888887395, 0.041666666666666664,
)
TRIG_MAX = 2.0**20 * 1.5707963267948966


@_inline
def _trig_reduce(x):
    """x = n*pi/2 + (hi + lo), |hi| <= pi/4, for |x| < TRIG_MAX."""
    t = _madd(x, 0.6366197723675814, 6755399441055744.0)
    nf = t - 6755399441055744.0
    n = _cast_bits(t) - np.int64(0x4338000000000000)
    # pi/2 as 31 + 32 + 28 + 53 significant bits: the first three products are exact
    r = _madd(nf, -1.5707963267341256, x)
    r1, e1 = _two_sum(r, -(nf * 6.077100506303966e-11))
    r2, e2 = _two_sum(r1, -(nf * 2.0222662487111665e-21))
    hi, lo = _fast_two_sum(r2, (e1 + e2) - nf * 8.4784276603689e-32)
    return n, hi, lo


@_inline
def _sin_kernel(hi, lo, z):
    return hi + _madd(z * hi, _horner(z, _SIN), lo * (1.0 - 0.5 * z))


@_inline
def _cos_kernel(hi, lo, z):
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + _madd(z * z, _horner(z, _COS), -hi * lo))


@_inline
def _sin_cos(x):
    n, hi, lo = _trig_reduce(x)
    z = hi * hi
    return n & 3, _sin_kernel(hi, lo, z), _cos_kernel(hi, lo, z)


@_inline
def _sin_q(q, s, c):
    """sin(x) from sin and cos of the reduced argument in quadrant q."""
    res = s if (q & 1) == 0 else c
    return -res if q >= 2 else res


@_inline
def _cos_q(q, s, c):
    res = c if (q & 1) == 0 else s
    return -res if (q == 1 or q == 2) else res


@_inline
def sin_f64(x):
    q, s, c = _sin_cos(x)
    return x if x == 0.0 else (_sin_q(q, s, c) if abs(x) < TRIG_MAX else _NAN)


@_inline
def cos_f64(x):
    q, s, c = _sin_cos(x)
    return _cos_q(q, s, c) if abs(x) < TRIG_MAX else _NAN


@_inline
def tan_f64(x):
    q, s, c = _sin_cos(x)
    odd = (q & 1) == 1
    res = _div(-c if odd else s, s if odd else c)
    return x if x == 0.0 else (res if abs(x) < TRIG_MAX else _NAN)


# float32 arguments: the same scheme in double with two Cody-Waite parts (enough for
# float32 inputs below TRIG_MAX) and kernels fitted to 2**-35, about half the work.
_SIN_F32 = (
    2.7249893800634184e-06, -0.00019840086488564262, 0.008333331874253296,
    -0.16666666663854116,
)
_COS_F32 = (
    -2.7300932493710444e-07, 2.480060017115865e-05, -0.0013888887671635462,
    0.04166666666432022,
)
_NAN32 = np.float32(np.nan)


@_inline
def _sin_cos_f32(x):
    xd = np.float64(x)
    t = _madd(xd, 0.6366197723675814, 6755399441055744.0)
    nf = t - 6755399441055744.0
    r = _madd(nf, -6.077100506506192e-11, _madd(nf, -1.5707963267341256, xd))
    z = r * r
    s = _madd(r * z, _horner(z, _SIN_F32), r)
    c = _madd(z * z, _horner(z, _COS_F32), 1.0 - 0.5 * z)
    return (_cast_bits(t) - np.int64(0x4338000000000000)) & 3, s, c


@_inline
def sin_f32(x):
    q, s, c = _sin_cos_f32(x)
    return x if x == 0 else (np.float32(_sin_q(q, s, c)) if abs(x) < TRIG_MAX else _NAN32)


@_inline
def cos_f32(x):
    q, s, c = _sin_cos_f32(x)
    return np.float32(_cos_q(q, s, c)) if abs(x) < TRIG_MAX else _NAN32


@_inline
def tan_f32(x):
    q, s, c = _sin_cos_f32(x)
    odd = (q & 1) == 1
    res = np.float32(_div(-c if odd else s, s if odd else c))
    return x if x == 0 else (res if abs(x) < TRIG_MAX else _NAN32)


# ---------------------------------------------------------------- power

# log(m) = 2s + (2/3)s^3 + s^5 U(s^2), s = f/(2+f), fitted on [0, 0.1716^2].
_POW_LG = (
    0.12915097151332902, 0.13285837656585459, 0.15385578402445177, 0.1818180819801728,
    0.2222222227140595, 0.28571428571337837, 0.4000000000000003,
)
_TWO52 = 4503599627370496.0


@_inline
def _log2_dd(ax):
    """log2(ax) as hi + lo, about 2**-66 relative: for ax > 0 finite."""
    k, f = _log_reduce(ax)
    d_hi, d_lo = _fast_two_sum(2.0, f)
    s = _div(f, d_hi)
    # f - s*d exactly (the remainder of a correctly rounded quotient is representable)
    s_lo = _div(_fma(-s, d_hi, f) - s * d_lo, d_hi)
    z_hi, z_lo = _two_prod(s, s)
    c_hi, c_lo = _two_prod(z_hi, s)
    c_lo += z_lo * s + 3.0 * z_hi * s_lo  # s^3 = c_hi + c_lo
    a_hi, a_lo = _two_prod(c_hi, 0.6666666666666666)
    a_lo += c_lo * 0.6666666666666666 + c_hi * 3.700743415417188e-17  # (2/3) s^3
    b = c_hi * z_hi * _horner(z_hi, _POW_LG)  # s^5 U(s^2)
    l_hi, l_lo = _fast_two_sum(2.0 * s, a_hi)
    l_lo += 2.0 * s_lo + a_lo + b  # log(1+f) = l_hi + l_lo
    l_hi, l_lo = _fast_two_sum(l_hi, l_lo)
    # times log2(e) = 1.4426950408889634 + 2.0355273740931033e-17
    m_hi, m_lo = _two_prod(l_hi, 1.4426950408889634)
    m_lo += l_lo * 1.4426950408889634 + l_hi * 2.0355273740931033e-17
    kf = float(k)
    t_hi, t_lo = _two_sum(kf, m_hi)
    return _fast_two_sum(t_hi, t_lo + m_lo)


@_inline
def pow_f64(x, y):
    ax = abs(x)
    ay = abs(y)
    l_hi, l_lo = _log2_dd(ax if (ax > 0.0 and ax < _INF) else 1.0)
    w_hi, w_lo = _two_prod(y, l_hi)
    w_lo = _madd(y, l_lo, w_lo)
    # 2**(w_hi + w_lo): n = round(w_hi), 2**(frac) via expm1 on frac*ln2
    wc = 1100.0 if w_hi > 1100.0 else w_hi
    wc = -1100.0 if wc < -1100.0 else wc
    t = wc + 6755399441055744.0
    nf = t - 6755399441055744.0
    n = _cast_bits(t) - np.int64(0x4338000000000000)
    fr = (wc - nf) + (w_lo if wc == w_hi else 0.0)
    r = _madd(fr, 0.6931471805599453, fr * 2.3190468138462996e-17)
    res = _scale(1.0 + _expm1_poly(r), n)
    # y's parity: |y| >= 2**53 is even; below 2**52 the shifter exposes the integer part
    ty = ay + _TWO52
    y_int = (ty - _TWO52 == ay) if ay < _TWO52 else True
    odd_bits = _cast_bits(ty) if ay < _TWO52 else _cast_bits(ay)
    y_odd = y_int and ay < 2.0 * _TWO52 and (odd_bits & 1) == 1
    # |x| is 0 or inf: |x|**y is 0 or inf by the sign of y (and of log|x|)
    big = (ax > 1.0) == (y > 0.0)
    res = (_INF if big else 0.0) if (ax == 0.0 or ax == _INF or ay == _INF) else res
    res = 1.0 if ax == 1.0 else res  # also (-1)**(+-inf)
    res = -res if (y_odd and _cast_bits(x) < 0) else res
    res = _NAN if (x < 0.0 and ax < _INF and not y_int) else res
    res = _NAN if (x != x or y != y) else res
    res = 1.0 if (y == 0.0 or x == 1.0) else res
    return res


# ---------------------------------------------------------------- erf

# erf(x) = x + x Q(x^2) for |x| < 0.84375, Q fitted on [0, 0.84375^2].
_ERF_SMALL = (
    1.0726571432176348e-08, -1.571446067260244e-07, 1.640162967934702e-06,
    -1.4922121574443055e-05, 0.00012055199941321885, -0.000854832379116413,
    0.005223977576377844, -0.02686617064077985, 0.11283791670935311, -0.376126389031834,
    0.12837916709551256,
)
# erfc(x) exp(x^2) as a polynomial in t - 0.4766483516483517, t = 2/(2+x), fitted on
# x in [0.84375, 6] to 2**-57 absolute error in erfc.
_ERFC = (
    -0.05597475391289942, -0.009164526093505352, 0.07272027075775585, -0.03474897504733618,
    -0.05045967909996386, 0.0717823950546562, 0.011678739649170738, -0.09400532831150309,
    0.03047694629397938, 0.1218203581787288, -0.07449584388453333, -0.21489440751994404,
    0.08537146462336637, 0.6250439021990424, 0.9225937209191182, 0.8102569922991515,
    0.2359637671082427,
)


@_inline
def erf_f64(x):
    a = abs(x)
    small = x + x * _horner(x * x, _ERF_SMALL)
    # erfc(a) = exp(-a^2) R(a); a^2 = q_hi + q_lo exactly, exp(-q_lo) ~ 1 - q_lo
    p = _horner(_div(2.0, 2.0 + a) - 0.4766483516483517, _ERFC)
    q_hi, q_lo = _two_prod(a, a)
    ac = 40.0 if q_hi > 40.0 else q_hi
    n, r = _exp_reduce(-ac)
    e = _scale(1.0 + _expm1_poly(r), n)
    big = _copysign(1.0 - e * (p - p * q_lo), x)
    big = _copysign(1.0, x) if a >= 6.0 else big
    return small if a < 0.84375 else big


# ---------------------------------------------------------------- float32 via float64

_erf_f64, _pow_f64 = erf_f64, pow_f64  # inlined by Numba into the float32 versions


@_inline
def erf_f32(x):
    return np.float32(_erf_f64(np.float64(x)))


@_inline
def pow_f32(x, y):
    return np.float32(_pow_f64(np.float64(x), np.float64(y)))


# What kernels call: each function compiled once per process and float type, as a Numba
# function of its own (with the kernels' error model), rather than inlined by Numba at
# every call (its IR typed and lowered again in every kernel, each time it is called:
# most of a tanh kernel's compile time). LLVM inlines it into the kernel's loop all the
# same (the kernel is optimised with the functions it calls linked in), which still
# vectorises; except the largest, beyond LLVM's inlining threshold, which Numba keeps
# inlining. tests/test_kernel_source.py checks that no call is left in a kernel.
_TOO_LARGE_FOR_LLVM = {"sin_f64", "cos_f64", "tan_f64", "pow_f32", "pow_f64"}


def _compiled_once(py_func, name: str):
    """``py_func`` as a function kernels call: an intrinsic whose call is to ``py_func``
    compiled for its argument's type, once per process, into a library of the kernels'
    code generator that each calling kernel links (``compiler.subroutine``). A ``njit``
    function would do the same, but with a Python wrapper and the JIT's machine code that
    no kernel uses (a third of its compile time)."""
    from .compiler import subroutine

    @intrinsic
    def call(typingctx, x):
        if not isinstance(x, types.Float):
            return None
        fndesc, library = subroutine(py_func, (x,), name)

        def codegen(context, builder, signature, args):
            context.active_code_library.add_linking_library(library)
            return context.call_internal(builder, fndesc, signature, args)

        return fndesc.restype(x), codegen

    call.__name__ = call.__qualname__ = py_func.__name__
    return call


for _name in [n for n in globals() if n.endswith(("_f32", "_f64")) and not n.startswith("_")
              and n not in _TOO_LARGE_FOR_LLVM]:
    globals()[_name] = _compiled_once(globals()[_name].py_func, _name)

MATH = {
    name: {"float32": globals()[name + "_f32"], "float64": globals()[name + "_f64"]}
    for name in (
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sigmoid",
        "sin", "cos", "tan", "erf", "sinh", "cosh", "arctan",
    )
}
MATH["power"] = {"float32": pow_f32, "float64": pow_f64}
