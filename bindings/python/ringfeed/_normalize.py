"""Normalisation of uint8 batches with torch, on the tensors' own device: the
CUDA path's step after the copy.

On a CUDA device the ring and the copy stay uint8 (a quarter of float32's
bytes over PCIe) and the batch is normalised where it lands, by torch ops
queued on the current stream: the stream the copy was ordered on
(rf_batch_copy_to), so they run after it. The arithmetic is the C workers'
(lib/transform/convert.c) step for step: x.to(float32) / 255, then (x - mean) / std in
float32, then the cast to float16 / bfloat16 (round to nearest even), so a
CPU loader and a CUDA loader give the same values; the tests hold this
function on CPU tensors against the C output.
"""

_TORCH_DTYPES = ("float32", "float16", "bfloat16")


def normalize(images, mean, std, dtype, layout, torch):
    """images: uint8 tensor [B, H, W, 3] (NHWC) or [B, 3, H, W] (NCHW) on any
    device; returns a new tensor of torch.<dtype> there."""
    if dtype not in _TORCH_DTYPES:
        raise ValueError("ringfeed: cannot normalise to %r" % (dtype,))
    shape = (1, 1, 1, 3) if layout == "NHWC" else (1, 3, 1, 1)
    m = torch.tensor([float(v) for v in mean], dtype=torch.float32,
                     device=images.device).view(shape)
    s = torch.tensor([float(v) for v in std], dtype=torch.float32,
                     device=images.device).view(shape)
    x = images.to(torch.float32).div_(255.0)
    x.sub_(m).div_(s)
    return x if dtype == "float32" else x.to(getattr(torch, dtype))
