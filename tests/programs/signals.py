"""Signal processing: filters, windows, correlation, spectra, noise."""

import numpy as np

from .case import Case


def moving_average(x, w):
    """The cumsum trick: each window's sum as a difference of two prefix sums."""
    c = np.cumsum(x, dtype=float)
    c[w:] = c[w:] - c[:-w]
    return c[w - 1:] / w


def autocorrelation(x):
    x = x - x.mean()
    r = np.correlate(x, x, mode="full")[len(x) - 1:]
    return r / r[0]


def power_spectrum(x):
    w = np.hanning(len(x))
    return np.abs(np.fft.rfft(x * w)) ** 2 / np.sum(w**2)


def real_dft(x):
    """A DFT written out with cosine and sine matrices (no complex numbers)."""
    n = x.shape[0]
    k = np.arange(n)
    angle = 2 * np.pi * np.outer(k, k) / n
    re = np.cos(angle) @ x
    im = -np.sin(angle) @ x
    return np.sqrt(re**2 + im**2)


def sinc_lowpass(x, cutoff, numtaps):
    n = np.arange(numtaps) - (numtaps - 1) / 2
    h = np.sinc(2 * cutoff * n) * np.hamming(numtaps)
    h /= h.sum()
    return np.convolve(x, h, mode="same")


def zero_crossing_rate(x):
    return np.mean(np.abs(np.diff(np.sign(x))) > 0)


def local_peaks(x, threshold):
    mid = x[1:-1]
    is_peak = (mid > x[:-2]) & (mid > x[2:]) & (mid > threshold)
    return is_peak, np.count_nonzero(is_peak)


def fir_filter(x, b):
    y = np.zeros_like(x)
    for k in range(len(b)):
        y[k:] += b[k] * x[:len(x) - k]
    return y


def one_pole_lowpass(x, a):
    y = np.empty_like(x)
    y[0] = x[0]
    for n in range(1, len(x)):
        y[n] = a * y[n - 1] + (1 - a) * x[n]
    return y


def add_noise_at_snr(x, snr_db, seed):
    rng = np.random.default_rng(seed)
    p = np.mean(x**2)
    noise = rng.normal(0.0, np.sqrt(p / 10 ** (snr_db / 10)), x.shape)
    y = x + noise
    return y, 10 * np.log10(p / np.mean((y - x) ** 2))


def chirp(t, f0, f1):
    phase = 2 * np.pi * (f0 * t + (f1 - f0) / (2 * t[-1]) * t**2)
    return np.sin(phase)


def frame_rms(x, frame):
    frames = x.reshape(-1, frame)
    return np.sqrt(np.mean(frames**2, axis=1))


def half_wave_rectify(a):
    """Clears the caller's negative samples in place."""
    a[a < 0] = 0


def soft_clip(x, limit=None):
    if limit is None:
        limit = np.max(np.abs(x)) / 2
    y = x.copy()
    y[y > limit] = limit
    y[y < -limit] = -limit
    return y


def xcorr_lag(x, y):
    c = np.correlate(x, y, mode="full")
    return np.argmax(c) - (len(y) - 1)


def _rng(seed):
    return np.random.default_rng(seed)


def _tone(n, seed):
    t = np.linspace(0, 1, n)
    return np.sin(2 * np.pi * 12 * t) + 0.3 * _rng(seed).normal(size=n)


def _lagged():
    x = _rng(100).normal(size=200)
    return x, np.roll(x, 17) + 0.1 * _rng(101).normal(size=200)


PROGRAMS = [
    Case("moving_average", moving_average, lambda: (_tone(400, 102), 8), grad=0),
    Case("autocorrelation", autocorrelation, lambda: (_tone(256, 103),), grad=0),
    Case("power_spectrum", power_spectrum, lambda: (_tone(256, 104),), grad=0),
    Case("real_dft", real_dft, lambda: (_tone(64, 105),), grad=0),
    Case("sinc_lowpass", sinc_lowpass, lambda: (_tone(300, 106), 0.1, 21), grad=0),
    Case("zero_crossing_rate", zero_crossing_rate, lambda: (_tone(500, 107),)),
    Case("local_peaks", local_peaks, lambda: (_tone(300, 108), 0.5)),
    Case("fir_filter", fir_filter, lambda: (_tone(300, 109), _rng(110).random(9)), grad=1),
    Case("one_pole_lowpass", one_pole_lowpass, lambda: (_tone(120, 111), 0.9), grad=0),
    Case("add_noise_at_snr", add_noise_at_snr, lambda: (_tone(300, 112), 10.0, 9)),
    Case("chirp", chirp, lambda: (np.linspace(0, 1, 500), 2.0, 20.0), grad=2),
    Case("frame_rms", frame_rms, lambda: (_tone(512, 113), 32), grad=0),
    Case("half_wave_rectify", half_wave_rectify, lambda: (_tone(400, 114),), exact=True),
    Case("soft_clip", soft_clip, lambda: (_tone(400, 115),), exact=True),
    Case("xcorr_lag", xcorr_lag, _lagged, exact=True),
]
