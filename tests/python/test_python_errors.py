"""Bad inputs raise a clear TypeError, ValueError or waco_hybrid.Error (the C++ message and its
hint), never crash and never convert silently: float64 arrays to a float32 plan and float32 ones
to a float64 plan, other dtypes, shapes, order, NaN, overlapping output, the wrong kernel."""

import numpy as np
import pytest
import scipy.sparse as sp

import waco_hybrid
from conftest import random_csr


@pytest.fixture(scope="module")
def plan():
    return waco_hybrid.make_plan(random_csr(12, 9, 0.3, 1), "spmv", "csr")


def test_float64_arrays_to_a_float32_plan_are_a_type_error_saying_how_to_convert(plan):
    assert plan.dtype == "float32"
    with pytest.raises(TypeError, match=r"x is float64, this plan computes in float32 .*"
                                        r"pass x\.astype\(numpy\.float32\)"):
        plan.spmv(np.ones(9))
    with pytest.raises(TypeError, match="x is float64, this plan computes in float32"):
        plan @ np.ones(9)
    with pytest.raises(TypeError, match=r"out is float64, this plan computes in float32"):
        plan.spmv(np.ones(9, np.float32), out=np.empty(12))
    spmm = waco_hybrid.make_plan(plan.matrix, "spmm", "csr")
    with pytest.raises(TypeError, match=r"B is float64.*B\.astype\(numpy\.float32\)"):
        spmm @ np.ones((9, 2))


def test_float32_arrays_to_a_float64_plan_are_a_type_error_saying_how_to_convert():
    A64 = random_csr(12, 9, 0.3, 1, dtype=np.float64)
    for make in (lambda: waco_hybrid.make_plan(A64, "spmv"),
                 lambda: waco_hybrid.make_plan(waco_hybrid.matrix(A64), "spmv")):
        p = make()
        assert p.dtype == "float64" and p.matrix.dtype == "float64"
        with pytest.raises(TypeError, match=r"x is float32, this plan computes in float64 .*"
                                            r"pass x\.astype\(numpy\.float64\)"):
            p.spmv(np.ones(9, np.float32))
        with pytest.raises(TypeError, match="x is float32, this plan computes in float64"):
            p @ np.ones(9, np.float32)
        with pytest.raises(TypeError, match="out is float32, this plan computes in float64"):
            p.spmv(np.ones(9), out=np.empty(12, np.float32))
        with pytest.raises(TypeError, match="x has dtype int64, this plan computes in float64"):
            p.spmv(np.ones(9, np.int64))
        with pytest.raises(TypeError, match="numpy.ndarray of float64, not list"):
            p.spmv([1.0] * 9)
        assert p.spmv(np.ones(9)).dtype == np.float64  # the right dtype still runs
    sddmm = waco_hybrid.make_plan(A64, "sddmm", "csr")
    with pytest.raises(TypeError, match=r"V is float32.*V\.astype\(numpy\.float64\)"):
        sddmm.sddmm(np.ones((12, 2)), np.ones((9, 2), np.float32))
    rng = np.random.default_rng(3)
    coords = np.stack([rng.integers(0, 4, 10) for _ in range(3)]).astype(np.int32)
    mttkrp = waco_hybrid.make_plan(waco_hybrid.tensor((4, 4, 4), coords, rng.random(10)),
                                   "mttkrp", "csf")
    with pytest.raises(TypeError, match="C is float32, this plan computes in float64"):
        mttkrp.mttkrp(np.ones((4, 2)), np.ones((4, 2), np.float32))


def test_a_plan_file_of_one_dtype_does_not_load_with_a_matrix_of_the_other(scratch):
    A = random_csr(12, 9, 0.3, 1)
    path = scratch / "f32.plan"
    waco_hybrid.make_plan(A, "spmv", "csr").save(path)
    with pytest.raises(waco_hybrid.Error, match="single precision") as e:
        waco_hybrid.load_plan(path, A.astype(np.float64))
    assert e.value.hint


def test_wrong_dtypes_and_types(scratch):
    for dtype in (np.int64, np.int32, np.float16, np.complex128, np.complex64, bool):
        B = sp.coo_array(np.eye(3, dtype=dtype))  # (csr_matrix makes float16 float32 itself)
        assert B.dtype == dtype
        with pytest.raises(TypeError, match=rf"A has dtype {np.dtype(dtype)}, .*float32 or "
                                            r"float64.*astype\(numpy.float32\) or "
                                            r"A\.astype\(numpy\.float64\)"):
            waco_hybrid.matrix(B)
        with pytest.raises(TypeError, match="float32 or float64"):
            waco_hybrid.make_plan(B, "spmv")
    with pytest.raises(TypeError, match=r"dtype int64.*astype\(numpy.float32\)"):
        waco_hybrid.matrix(sp.csr_matrix(np.eye(3, dtype=np.int64)))
    coords = np.zeros((3, 2), np.int32)
    with pytest.raises(TypeError, match="values has dtype float16.*float32 or float64"):
        waco_hybrid.tensor((2, 2, 2), coords, np.ones(2, np.float16))
    with pytest.raises(TypeError, match=r"values are float32 but dtype is float64"):
        waco_hybrid.tensor((2, 2, 2), coords, np.ones(2, np.float32), dtype=np.float64)
    with pytest.raises(TypeError, match="numpy.ndarray of float32 or float64, not list"):
        waco_hybrid.tensor((2, 2, 2), coords, [1.0, 2.0])
    with pytest.raises(TypeError, match="not supported: pass float32 or float64"):
        waco_hybrid.load(scratch / "any.mtx", dtype=np.int32)
    with pytest.raises(TypeError, match=r"scipy.sparse.csr_array\(A\)"):
        waco_hybrid.matrix(np.eye(3, dtype=np.float32))
    with pytest.raises(TypeError, match="SciPy sparse matrix"):
        waco_hybrid.make_plan([[1.0]], "spmv")
    p = waco_hybrid.make_plan(sp.csr_array(np.eye(3, dtype=np.float32)), "spmv")
    with pytest.raises(TypeError, match="x has dtype int32"):
        p.spmv(np.ones(3, dtype=np.int32))
    with pytest.raises(TypeError, match="numpy.ndarray of float32, not list"):
        p.spmv([1.0, 2.0, 3.0])


def test_shapes_order_and_output(plan):
    with pytest.raises(ValueError, match=r"x has shape \(8,\), this plan needs \(9,\)"):
        plan.spmv(np.ones(8, np.float32))
    with pytest.raises(ValueError, match=r"x has shape \(9, 1\)"):
        plan.spmv(np.ones((9, 1), np.float32))
    with pytest.raises(ValueError, match="not C-contiguous.*ascontiguousarray"):
        plan.spmv(np.ones(18, np.float32)[::2])
    with pytest.raises(ValueError, match=r"out has shape \(9,\), this plan needs \(12,\)"):
        plan.spmv(np.ones(9, np.float32), out=np.empty(9, np.float32))
    ro = np.empty(12, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        plan.spmv(np.ones(9, np.float32), out=ro)
    buf = np.ones(12, np.float32)
    with pytest.raises(ValueError, match="overlaps an input"):
        plan.spmv(buf[:9], out=buf)
    with pytest.raises(ValueError, match="this plan runs spmv, not spmm"):
        plan @ np.ones((9, 2), np.float32)
    with pytest.raises(ValueError, match="this plan runs spmv, not sddmm"):
        plan.sddmm(np.ones((12, 2), np.float32), np.ones((9, 2), np.float32))
    spmm = waco_hybrid.make_plan(plan.matrix, "spmm", "csr")
    with pytest.raises(ValueError, match="not C-contiguous"):
        spmm.spmm(np.ones((4, 9), np.float32).T)  # Fortran order
    with pytest.raises(ValueError, match=r"B has shape \(8, 4\), this plan needs \(9, n\)"):
        spmm.spmm(np.ones((8, 4), np.float32))
    with pytest.raises(ValueError, match="unknown kernel 'spmx'"):
        waco_hybrid.make_plan(plan.matrix, "spmx")


def test_nan_and_bad_values_raise_with_the_cpp_message_and_hint():
    A = random_csr(12, 9, 0.3, 1)
    A.data[3] = np.nan
    with pytest.raises(waco_hybrid.Error, match="value of entry 3 is not finite") as e:
        waco_hybrid.make_plan(A, "spmv")
    assert e.value.hint == "remove NaN and infinite values before tuning"
    assert isinstance(e.value, RuntimeError)
    A.data[3] = np.inf
    with pytest.raises(waco_hybrid.Error, match="not finite"):
        waco_hybrid.tune(A)
    # Indices the C++ checks (columns out of range), through the COO path.
    bad = sp.coo_matrix((np.ones(2, np.float32), (np.array([0, 1]), np.array([0, 5]))), shape=(2, 9))
    bad.col[1] = 12  # beyond the 9 columns, behind SciPy's back
    with pytest.raises(waco_hybrid.Error, match=r"outside the 2 x 9 matrix") as e:
        waco_hybrid.matrix(bad)
    assert e.value.hint == "coordinates are 0-based"
    with pytest.raises(waco_hybrid.Error, match=r"format letter 'Q'") as e:
        waco_hybrid.make_plan(random_csr(12, 9, 0.3, 1), "spmv", "order=i,k format=QQ")
    assert "or a shortcut: csr" in e.value.hint


def test_missing_file_and_bad_plan_file(scratch):
    with pytest.raises(waco_hybrid.Error) as e:
        waco_hybrid.load(scratch / "missing.mtx")
    assert str(e.value) and e.value.message == str(e.value)
    bad = scratch / "bad.plan"
    bad.write_text("not json")
    with pytest.raises(waco_hybrid.Error, match="not a waco-hybrid plan"):
        waco_hybrid.load_plan(bad, random_csr(12, 9, 0.3, 1))


def test_a_wrong_dtype_is_a_dtype_error_both_type_and_value_error():
    # NumPy raises TypeError for a dtype, the shape and order checks ValueError: a DtypeError is
    # both, so that either `except` catches a wrong dtype.
    assert issubclass(waco_hybrid.DtypeError, TypeError)
    assert issubclass(waco_hybrid.DtypeError, ValueError)
    p = waco_hybrid.make_plan(sp.csr_array(np.eye(3, dtype=np.float32)), "spmv")
    with pytest.raises(ValueError, match="this plan computes in float32"):
        p.spmv(np.ones(3))  # float64 into a float32 plan (C++ side)
    with pytest.raises(waco_hybrid.DtypeError, match="float32 or float64"):
        waco_hybrid.matrix(sp.coo_array(np.eye(3, dtype=np.int64)))  # Python side
    with pytest.raises(ValueError, match="not supported: pass float32 or float64"):
        waco_hybrid.load("any.mtx", dtype=np.int32)
    with pytest.raises(TypeError) as e:  # not an ndarray at all: a TypeError only
        p.spmv([1.0, 2.0, 3.0])
    assert not isinstance(e.value, ValueError)
