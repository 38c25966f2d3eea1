"""Bad inputs raise a clear TypeError, ValueError or waco_hybrid.Error (the C++ message and its
hint), never crash and never convert silently: float64, other dtypes, shapes, order, NaN,
overlapping output, the wrong kernel."""

import numpy as np
import pytest
import scipy.sparse as sp

import waco_hybrid
from conftest import random_csr


@pytest.fixture(scope="module")
def plan():
    return waco_hybrid.make_plan(random_csr(12, 9, 0.3, 1), "spmv", "csr")


def test_float64_is_not_supported_yet_and_says_how_to_pass_float32(plan):
    A64 = random_csr(12, 9, 0.3, 1).astype(np.float64)
    for call in (lambda: waco_hybrid.tune(A64), lambda: waco_hybrid.make_plan(A64, "spmv"),
                 lambda: waco_hybrid.matrix(A64)):
        with pytest.raises(TypeError, match=r"float64 is not supported yet.*astype\(numpy.float32\)"):
            call()
    with pytest.raises(TypeError, match=r"x is float64: float64 is not supported yet.*float32"):
        plan.spmv(np.ones(9))
    with pytest.raises(TypeError, match="float64 is not supported yet"):
        plan @ np.ones(9)


def test_wrong_dtypes_and_types():
    with pytest.raises(TypeError, match=r"dtype int64.*astype\(numpy.float32\)"):
        waco_hybrid.matrix(sp.csr_matrix(np.eye(3, dtype=np.int64)))
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
