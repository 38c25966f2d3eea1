"""waco_hybrid's conversions and kernels against SciPy's products: canonical and non-canonical
inputs, empty rows, one column, every SciPy format, the four kernels, `plan @ x`, out=, and no
Python-side copy of canonical CSR; in float32 and in float64 (against SciPy and NumPy in float64
to a tolerance that float32 arithmetic cannot meet)."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import waco_hybrid
from conftest import matrix, random_csr, vector


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max(initial=0)))


def close64(got, want):
    """float64 results to double precision: rel 1e-12 (float32 arithmetic is off by ~1e-7)."""
    assert got.dtype == np.float64, got.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12,
                               atol=1e-12 * max(1.0, np.abs(want).max(initial=0)))



def reversed_rows(A):
    """A copy of CSR A with each row's entries in reverse (unsorted) column order."""
    unsorted = A.copy()
    for r in range(unsorted.shape[0]):
        s, e = unsorted.indptr[r], unsorted.indptr[r + 1]
        unsorted.indices[s:e] = unsorted.indices[s:e][::-1].copy()
        unsorted.data[s:e] = unsorted.data[s:e][::-1].copy()
    unsorted.has_sorted_indices = False
    return unsorted

def test_spmv_equals_scipy_for_given_schedules():
    A = random_csr(37, 29, 0.15, 3, empty_rows=(1, 20))
    x = vector(29, 4)
    for schedule in ("csr", "bcsr4x4", "csc"):
        plan = waco_hybrid.make_plan(A, "spmv", schedule, threads=2)
        assert plan.verdict == "given" and plan.kernel == "spmv" and plan.shape == (37, 29)
        assert plan.dtype == "float32" and plan.matrix.dtype == "float32"
        assert plan.spmv(x).dtype == np.float32
        close(plan.spmv(x), A @ x)
        close(plan @ x, A @ x)
        out = np.full(37, 123.0, dtype=np.float32)  # overwritten, not accumulated into
        assert plan.spmv(x, out=out) is out
        close(out, A @ x)
    assert plan.report is None  # make_plan: no tune report


def test_every_scipy_format_and_non_canonical_input():
    A = random_csr(40, 33, 0.2, 5)
    x = vector(33, 6)
    want = A @ x
    formats = [sp.csr_array(A), A.tocoo(), sp.coo_array(A), A.tocsc(), sp.csc_array(A),
               A.tolil(), A.todok(), A.tobsr(), A.todia()]
    # Unsorted columns in each row, and repeated coordinates (summed, as SciPy does).
    unsorted = reversed_rows(A)
    coo = A.tocoo()
    half = coo.data / 2
    dupes = sp.coo_matrix((np.concatenate([half, half]).astype(np.float32),
                           (np.concatenate([coo.row, coo.row]), np.concatenate([coo.col, coo.col]))),
                          shape=A.shape)
    int64_indices = sp.csr_matrix((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)),
                                  shape=A.shape)
    for B in formats + [unsorted, dupes, int64_indices]:
        M = waco_hybrid.matrix(B)
        assert M.shape == (40, 33) and M.nnz == A.nnz, type(B)
        assert M.fingerprint == waco_hybrid.matrix(A).fingerprint
        close(waco_hybrid.make_plan(M, "spmv", "csr") @ x, want)
    indptr, indices, data = waco_hybrid.matrix(unsorted).csr_arrays()
    assert (indptr == A.indptr).all() and (indices == A.indices).all()
    assert data.dtype == np.float32
    np.testing.assert_array_equal(data, A.data)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_column_one_row_and_empty_matrices(dtype):
    check = close64 if dtype == np.float64 else close
    col = sp.csr_array(np.array([[1.0], [0.0], [-2.5], [4.0]], dtype=dtype))
    y = waco_hybrid.make_plan(col, "spmv") @ np.array([2.0], dtype=dtype)
    assert y.dtype == dtype
    check(y, col @ np.array([2.0], dtype=dtype))
    row = sp.csr_array(np.array([[0.0, 3.0, 0.0, -1.0]], dtype=dtype))
    x = vector(4, 1, dtype)
    check(waco_hybrid.make_plan(row, "spmv") @ x, row @ x)
    empty = sp.csr_array((5, 7), dtype=dtype)
    y = waco_hybrid.make_plan(empty, "spmv") @ vector(7, 2, dtype)
    assert y.shape == (5,) and y.dtype == dtype and not y.any()


def test_spmm_sddmm_mttkrp_equal_scipy_and_numpy():
    A = random_csr(37, 29, 0.15, 7, empty_rows=(1,))
    B = matrix(29, 5, 8)
    plan = waco_hybrid.make_plan(A, "spmm", "csr", dense=5)
    close(plan.spmm(B), A @ B)
    close(plan @ B, A @ B)
    out = np.empty((37, 5), dtype=np.float32)
    assert plan.spmm(B, out=out) is out
    close(out, A @ B)
    close(plan @ matrix(29, 3, 9), A @ matrix(29, 3, 9))  # n other than the tuned one

    U, V = matrix(37, 6, 10), matrix(29, 6, 11)
    rows = np.repeat(np.arange(37), np.diff(A.indptr))
    want = A.data * np.einsum("ij,ij->i", U[rows], V[A.indices])
    for schedule in ("csr", "csc"):
        close(waco_hybrid.make_plan(A, "sddmm", schedule).sddmm(U, V), want)

    rng = np.random.default_rng(12)
    coords = np.stack([rng.integers(0, d, 60) for d in (9, 7, 5)]).astype(np.int32)
    vals = (rng.random(60) * 2 - 1).astype(np.float32)
    T = waco_hybrid.tensor((9, 7, 5), coords, vals)
    assert T.order == 3 and T.shape == (9, 7, 5)
    Bt, Ct = matrix(7, 4, 13), matrix(5, 4, 14)
    want = np.zeros((9, 4))
    for e in range(60):
        want[coords[0, e]] += vals[e] * Bt[coords[1, e]] * Ct[coords[2, e]]
    close(waco_hybrid.make_plan(T, "mttkrp", "csf").mttkrp(Bt, Ct), want)


def test_tensor_from_a_tns_file(scratch):
    path = scratch / "t.tns"
    path.write_text("1 1 1 2.0\n2 3 1 -1.0\n3 2 2 0.5\n")  # FROSTT: 1-based
    T = waco_hybrid.load(path)
    assert T.shape == (3, 3, 2) and T.nnz == 3
    y = waco_hybrid.make_plan(T, "mttkrp", "csf").mttkrp(np.ones((3, 2), np.float32),
                                                           np.ones((2, 2), np.float32))
    close(y, np.array([[2, 2], [-1, -1], [0.5, 0.5]]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_canonical_csr_is_not_copied_on_the_python_side(dtype):
    # numpy reports its allocations to tracemalloc; waco::Matrix's own copy (C++) is not traced.
    n = 250_000  # 1M nonzeros: 4 a row at distinct columns
    cols = np.sort((np.arange(n)[:, None] + np.arange(4)[None, :] * 1000) % n, axis=1)
    A = sp.csr_matrix((np.ones(4 * n, dtype), cols.ravel().astype(np.int32),
                       np.arange(0, 4 * n + 1, 4, dtype=np.int32)), shape=(n, n))
    assert A.indices.dtype == np.int32 and A.has_canonical_format
    size = A.data.nbytes + A.indices.nbytes
    tracemalloc.start()
    try:
        assert waco_hybrid.matrix(A).dtype == np.dtype(dtype).name
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        waco_hybrid.matrix(A.tocoo())  # the other path converts once: the test can see copies
        _, peak_coo = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size / 20, (peak, size)
    assert peak_coo > size / 4, (peak_coo, size)


def test_float64_spmv_spmm_sddmm_equal_scipy_in_float64():
    A = random_csr(37, 29, 0.15, 3, empty_rows=(1, 20), dtype=np.float64)
    assert A.dtype == np.float64
    M = waco_hybrid.matrix(A)
    assert M.dtype == "float64" and "float64" in repr(M)
    x = vector(29, 4, np.float64)
    want = A @ x
    for schedule in ("csr", "bcsr4x4", "csc"):
        plan = waco_hybrid.make_plan(M, "spmv", schedule, threads=2)
        assert plan.dtype == "float64" and "float64" in repr(plan)
        close64(plan.spmv(x), want)
        close64(plan @ x, want)
        out = np.full(37, 123.0)  # overwritten, not accumulated into
        assert plan.spmv(x, out=out) is out
        close64(out, want)

    B = matrix(29, 5, 8, np.float64)
    plan = waco_hybrid.make_plan(A, "spmm", "csr", dense=5)
    assert plan.dtype == "float64"
    close64(plan.spmm(B), A @ B)
    close64(plan @ B, A @ B)
    out = np.empty((37, 5))
    assert plan.spmm(B, out=out) is out
    close64(out, A @ B)
    close64(plan @ matrix(29, 3, 9, np.float64), A @ matrix(29, 3, 9, np.float64))

    U, V = matrix(37, 6, 10, np.float64), matrix(29, 6, 11, np.float64)
    rows = np.repeat(np.arange(37), np.diff(A.indptr))
    want = A.data * np.einsum("ij,ij->i", U[rows], V[A.indices])
    for schedule in ("csr", "csc"):
        close64(waco_hybrid.make_plan(A, "sddmm", schedule).sddmm(U, V), want)
    out = np.empty(A.nnz)
    assert waco_hybrid.make_plan(A, "sddmm", "csr").sddmm(U, V, out=out) is out
    close64(out, want)


def test_float64_tolerance_tells_the_precisions_apart():
    """The float64 checks can fail: the same product in float32 misses rel 1e-12."""
    A = random_csr(37, 29, 0.15, 3, empty_rows=(1, 20), dtype=np.float64)
    x = vector(29, 4, np.float64)
    p32 = waco_hybrid.make_plan(A.astype(np.float32), "spmv", "csr")
    y32 = p32 @ x.astype(np.float32)
    assert y32.dtype == np.float32
    with pytest.raises(AssertionError):
        close64(y32.astype(np.float64), A @ x)
    close(y32, A @ x)


def test_float64_mttkrp_equals_numpy_in_float64(scratch):
    rng = np.random.default_rng(12)
    coords = np.stack([rng.integers(0, d, 60) for d in (9, 7, 5)]).astype(np.int32)
    vals = rng.random(60) * 2 - 1
    T = waco_hybrid.tensor((9, 7, 5), coords, vals)
    assert T.order == 3 and T.dtype == "float64"
    Bt, Ct = matrix(7, 4, 13, np.float64), matrix(5, 4, 14, np.float64)
    want = np.zeros((9, 4))
    for e in range(60):
        want[coords[0, e]] += vals[e] * Bt[coords[1, e]] * Ct[coords[2, e]]
    plan = waco_hybrid.make_plan(T, "mttkrp", "csf")
    assert plan.dtype == "float64"
    close64(plan.mttkrp(Bt, Ct), want)
    out = np.empty((9, 4))
    assert plan.mttkrp(Bt, Ct, out=out) is out
    close64(out, want)
    # A pattern tensor (every value 1) in float64, and a .tns file read in float64.
    ones = waco_hybrid.tensor((9, 7, 5), coords, dtype=np.float64)
    assert ones.dtype == "float64"
    assert waco_hybrid.tensor((9, 7, 5), coords).dtype == "float32"
    path = scratch / "t.tns"
    path.write_text("1 1 1 0.1\n2 3 1 -1.0\n3 2 2 0.3\n")  # FROSTT: 1-based
    T = waco_hybrid.load(path, dtype="float64")
    assert T.dtype == "float64" and T.shape == (3, 3, 2)
    y = waco_hybrid.make_plan(T, "mttkrp", "csf").mttkrp(np.ones((3, 2)), np.ones((2, 2)))
    np.testing.assert_array_equal(y, [[0.1, 0.1], [-1.0, -1.0], [0.3, 0.3]])  # 0.1: exactly


def test_float64_conversions_keep_double_precision(scratch):
    A = random_csr(40, 33, 0.2, 5, dtype=np.float64)
    x = vector(33, 6, np.float64)
    want = A @ x
    fingerprint = waco_hybrid.matrix(A).fingerprint
    unsorted = reversed_rows(A)
    coo = A.tocoo()  # each entry as two halves at one coordinate (summed, as SciPy does)
    half = coo.data / 2
    dupes = sp.coo_array((np.concatenate([half, half]), (np.concatenate([coo.row, coo.row]),
                                                         np.concatenate([coo.col, coo.col]))),
                         shape=A.shape)
    assert dupes.dtype == np.float64
    for B in (sp.csr_array(A), A.tocoo(), A.tocsc(), A.todok(), unsorted, dupes):
        M = waco_hybrid.matrix(B)
        assert M.dtype == "float64" and M.nnz == A.nnz and M.fingerprint == fingerprint, type(B)
        close64(waco_hybrid.make_plan(M, "spmv", "csr") @ x, want)
    indptr, indices, data = waco_hybrid.matrix(unsorted).csr_arrays()
    assert data.dtype == np.float64
    assert (indptr == A.indptr).all() and (indices == A.indices).all()
    np.testing.assert_array_equal(data, A.data)  # every bit of every value
    # A Matrix Market file in float64: its values as written, to double's precision.
    path = scratch / "a.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n2 3 3\n"
                    "1 1 0.1\n1 3 -2.718281828459045\n2 2 1.0000000000000002\n")
    M = waco_hybrid.load(path, dtype=np.float64)
    assert M.dtype == "float64"
    np.testing.assert_array_equal(M.csr_arrays()[2], [0.1, -2.718281828459045, 1.0000000000000002])
    single = waco_hybrid.load(path)  # float32 stays the default
    assert single.dtype == "float32" and single.csr_arrays()[2].dtype == np.float32
    assert waco_hybrid.load(path, "f64").dtype == "float64"


def test_float64_plan_save_and_load_round_trip(scratch):
    A = random_csr(37, 29, 0.15, 3, dtype=np.float64)
    B = matrix(29, 4, 5, np.float64)
    plan = waco_hybrid.make_plan(A, "spmm", "bcsr4x4", dense=4)
    path = scratch / "a64.plan"
    plan.save(path)
    for loaded in (waco_hybrid.load_plan(path, A), waco_hybrid.Plan.load(str(path), A)):
        assert loaded.dtype == "float64" and loaded.kernel == "spmm"
        assert loaded.schedule == plan.schedule
        C = loaded @ B
        assert C.dtype == np.float64
        np.testing.assert_array_equal(C, plan @ B)
        close64(C, A @ B)
