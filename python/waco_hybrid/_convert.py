"""SciPy sparse matrices and arrays into waco_hybrid.Matrix: no copy on the Python side when A is
canonical CSR (sorted indices, no repeats) with int32 indices and float32 data, else one
conversion to coordinates (waco-hybrid sorts them and sums repeats). Never a dtype conversion of
the values: float64 and other dtypes are a TypeError saying what to pass."""

import numpy as np

from ._waco import Matrix

_INT32_MAX = np.iinfo(np.int32).max


def check_values_dtype(dtype, what):
    """TypeError unless float32; float64 (issue 37) is named as not supported yet."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return
    if dtype == np.float64:
        raise TypeError(
            f"{what} is float64: float64 is not supported yet (waco-hybrid runs float32 only; "
            f"double precision is issue 37); pass {what}.astype(numpy.float32), a float32 copy")
    raise TypeError(f"{what} has dtype {dtype}, waco-hybrid runs float32: "
                    f"pass {what}.astype(numpy.float32)")


def _index32(a, what):
    """An index array as int32: itself when it is int32, else a checked copy (the indices, not
    the values: int64 indices of a matrix that fits 32 bits)."""
    a = np.asarray(a)
    if a.dtype == np.int32:
        return np.ascontiguousarray(a)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what} has dtype {a.dtype}, expected integers")
    if a.size and (a.min() < 0 or a.max() > _INT32_MAX):
        raise ValueError(f"{what} holds an index outside [0, 2^31): waco-hybrid stores 32-bit "
                         "indices")
    return a.astype(np.int32)


def _is_sparse(A):
    try:
        import scipy.sparse
    except ImportError:  # without SciPy only waco_hybrid.Matrix operands exist
        return False
    return scipy.sparse.issparse(A)


def as_matrix(A):
    """A waco_hybrid.Matrix for A (a SciPy sparse matrix or array, or a Matrix already)."""
    if isinstance(A, Matrix):
        return A
    if not _is_sparse(A):
        kind = type(A).__module__ + "." + type(A).__name__
        hint = (" (a dense array: pass scipy.sparse.csr_array(A))"
                if isinstance(A, np.ndarray) else "")
        raise TypeError("A must be a SciPy sparse matrix or array (csr_array, csr_matrix, "
                        f"coo_array, csc_matrix, ...) or a waco_hybrid.Matrix, not {kind}{hint}")
    if len(A.shape) != 2:
        raise ValueError(f"A has {len(A.shape)} dimensions; a 3-D tensor is waco_hybrid.tensor()")
    check_values_dtype(A.dtype, "A")
    rows, cols = (int(n) for n in A.shape)
    if A.format == "csr" and A.has_canonical_format:
        # The arrays themselves (waco::Matrix::from_csr checks and copies them once).
        indptr = A.indptr if A.indptr.dtype in (np.int32, np.int64) else A.indptr.astype(np.int64)
        return Matrix._from_csr(rows, cols, indptr, _index32(A.indices, "A.indices"), A.data)
    coo = A.tocoo(copy=False)
    return Matrix._from_coo(rows, cols, _index32(coo.row, "A.row"), _index32(coo.col, "A.col"),
                            np.ascontiguousarray(coo.data))
