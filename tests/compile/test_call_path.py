"""The BuiltKernel call path: the fast path for exact ndarrays never lets a wrong argument through,
torch CPU tensors go straight to their data pointer, and results stay correct (issue 29)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autosched as asc
from autosched import te
from autosched.compile.array_ptr import data_pointer

torch = pytest.importorskip("torch")

M, N = 7, 13  # shapes that divide nothing


@pytest.fixture(scope="module")
def axpy() -> asc.BuiltKernel:
    """C = 2 A + B over (7, 13) float32."""
    A, B = te.placeholder((M, N), "A"), te.placeholder((M, N), "B")
    C = te.compute((M, N), lambda i, j: 2.0 * A[i, j] + B[i, j], "C")
    return asc.build(asc.create_schedule(C), [A, B, C])


def arrays(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((M, N)).astype(np.float32) for _ in range(2))
    return a, b, np.full((M, N), np.nan, np.float32)


def test_results_are_correct_on_the_fast_path(axpy) -> None:
    for seed in range(3):  # the same kernel on fresh arrays each call: no stale pointer
        a, b, c = arrays(seed)
        axpy(a, b, c)
        np.testing.assert_allclose(c, 2 * a + b, rtol=1e-6)


def test_a_wrong_argument_after_a_right_one_is_refused(axpy) -> None:
    a, b, c = arrays()
    axpy(a, b, c)
    with pytest.raises(TypeError, match=r"argument 1 \(B\): dtype float64, expected float32"):
        axpy(a, b.astype(np.float64), c)
    with pytest.raises(TypeError, match=r"argument 0 \(A\): dtype >f4, expected float32"):
        axpy(a.astype(">f4"), b, c)  # same kind and size, other byte order
    with pytest.raises(ValueError, match=r"argument 0 \(A\): array must be C-contiguous"):
        axpy(np.asfortranarray(a), b, c)  # same shape and dtype, other strides
    with pytest.raises(ValueError, match=r"argument 1 \(B\): array must be C-contiguous"):
        axpy(a, np.zeros((M, 2 * N), np.float32)[:, ::2], c)  # a strided view of the right shape
    ro = c.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 2 \(C\): output array is read-only"):
        axpy(a, b, ro)
    with pytest.raises(ValueError, match=r"argument 2 \(C\): shape \(13, 7\), expected \(7, 13\)"):
        axpy(a, b, np.zeros((N, M), np.float32))
    with pytest.raises(TypeError, match=r"kernel takes 3 arrays \(A, B, C\), got 4"):
        axpy(a, b, c, c)
    with pytest.raises(TypeError, match=r"argument 2 \(C\): expected a numpy array, got float"):
        axpy(a, b, 1.0)
    # an array whose flags change after a good call is checked again
    c.flags.writeable = False
    with pytest.raises(ValueError, match="output array is read-only"):
        axpy(a, b, c)
    c.flags.writeable = True
    axpy(a, b, c)
    np.testing.assert_allclose(c, 2 * a + b, rtol=1e-6)


def test_read_only_inputs_subclasses_and_offset_views_work(axpy) -> None:
    a, b, c = arrays()
    a.flags.writeable = False  # an input may be read-only
    big = np.zeros((M + 1, N), np.float32)
    big[1:] = b
    out = np.full((M + 2, N), np.nan, np.float32)
    axpy(a, big[1:], out[1:-1])  # views that start past their base's first element
    np.testing.assert_allclose(out[1:-1], 2 * a + b, rtol=1e-6)
    assert np.isnan(out[0]).all() and np.isnan(out[-1]).all()

    class Tagged(np.ndarray):
        pass

    c2 = np.full((M, N), np.nan, np.float32).view(Tagged)
    axpy(a.view(Tagged), b, c2)
    np.testing.assert_allclose(np.asarray(c2), 2 * a + b, rtol=1e-6)


def test_torch_cpu_tensors(axpy) -> None:
    a, b, _ = arrays()
    ta, tb = torch.from_numpy(a), torch.from_numpy(b).requires_grad_(True)
    tc = torch.full((M, N), float("nan"))
    axpy(ta, tb, tc)
    np.testing.assert_allclose(tc.numpy(), 2 * a + b, rtol=1e-6)
    big = torch.full((M + 1, N), float("nan"))
    axpy(ta, tb, big[1:])  # a view with a storage offset
    np.testing.assert_allclose(big[1:].numpy(), 2 * a + b, rtol=1e-6)
    assert torch.isnan(big[0]).all()
    tc2 = torch.full((M, N), float("nan"))
    axpy(a, tb, tc2)  # numpy and torch mixed
    np.testing.assert_allclose(tc2.numpy(), 2 * a + b, rtol=1e-6)
    assert [type(x) for x in axpy.check_args([ta, tb, tc])] == [np.ndarray] * 3


def test_wrong_torch_tensors_are_refused(axpy) -> None:
    a, b, c = (torch.from_numpy(x) for x in arrays())
    axpy(a, b, c)
    with pytest.raises(TypeError, match=r"argument 1 \(B\): dtype float64, expected float32"):
        axpy(a, b.double(), c)
    with pytest.raises(ValueError, match=r"argument 2 \(C\): shape \(13, 7\), expected \(7, 13\)"):
        axpy(a, b, torch.zeros(N, M))
    with pytest.raises(ValueError, match=r"argument 0 \(A\): tensor must be C-contiguous"):
        axpy(torch.zeros(N, M).T, b, c)
    with pytest.raises(TypeError, match=r"argument 2 \(C\): a tensor on meta"):
        axpy(a, b, torch.empty(M, N, device="meta"))
    with pytest.raises(TypeError, match=r"argument 1 \(B\): a torch.sparse_coo tensor"):
        axpy(a, b.to_sparse(), c)


def test_bfloat16_torch_tensors_reach_a_bfloat16_kernel() -> None:
    A = te.placeholder((5,), "A", "bfloat16")
    B = te.compute((5,), lambda i: A[i] + 1.0, "B")
    f = asc.build(asc.create_schedule(B), [A, B])
    x = torch.tensor([0.5, 1.0, -2.0, 3.0, 8.0], dtype=torch.bfloat16)
    y = torch.zeros(5, dtype=torch.bfloat16)
    f(x, y)
    assert torch.equal(y, x + 1)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=3), start=st.integers(0, 5),
       step=st.integers(1, 3), dtype=st.sampled_from(["float32", "float64", "int32", "float16"]))
def test_data_pointer_is_the_first_element(shape, start, step, dtype) -> None:
    base = np.zeros([d * step + start for d in shape], dtype)
    view = base[tuple(slice(start, None, step) for _ in shape)]
    assert data_pointer(view) == view.__array_interface__["data"][0]
    assert data_pointer(base) == base.ctypes.data
