"""Helpers the bench/ scripts share: relative error against an fp64
reference (the kernel checkers) and CUDA-event medians (the peer scripts;
torch is imported only by the caller that times)."""
import numpy as np


def ratios(got, ref):
    """RMS(error) / RMS(reference) and max |error| / max |reference|."""
    err = got.astype(np.float64) - ref
    rms = np.sqrt(np.mean(err ** 2)) / max(np.sqrt(np.mean(ref ** 2)), 1e-300)
    mx = np.abs(err).max() / max(np.abs(ref).max(), 1e-300)
    return rms, mx


def median_ms(fn, reps=20, warmup=3):
    """Median over `reps` calls of fn's device time in ms (CUDA events),
    after `warmup` calls."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]
