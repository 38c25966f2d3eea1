"""SciPy sparse matrices and arrays into waco_hybrid.Matrix: no copy on the Python side when A is
canonical CSR (sorted indices, no repeats) with int32 indices and float32 or float64 data, else
one conversion to coordinates (waco-hybrid sorts them and sums repeats). Never a dtype conversion
of the values: float32 values make a single-precision Matrix, float64 ones a double-precision
Matrix, and other dtypes (integers, bool, float16, complex) are a DtypeError (a TypeError and a
ValueError) saying what to pass."""

import numpy as np

from ._waco import DtypeError, Matrix

_INT32_MAX = np.iinfo(np.int32).max
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# The CLI's names of the value types (`waco-hybrid tune --dtype`), beside NumPy's.
_CLI_NAMES = {"f32": "float32", "f64": "float64"}


def check_values_dtype(dtype, what):
    """The NumPy name ("float32" or "float64") of a matrix's values' dtype; DtypeError for any
    other dtype, saying to pass float32 or float64 (nothing is converted here)."""
    dtype = np.dtype(dtype)
    if dtype in _FLOATS:
        return dtype.name
    raise DtypeError(f"{what} has dtype {dtype}, waco-hybrid holds float32 or float64 values: "
                    f"pass {what}.astype(numpy.float32) or {what}.astype(numpy.float64)")


def dtype_name(dtype):
    """A dtype argument (numpy.float32, numpy.float64, their numpy.dtype or names, or the CLI's
    "f32", "f64") as "float32" or "float64"; DtypeError for anything else."""
    if isinstance(dtype, str) and dtype.lower() in _CLI_NAMES:
        return _CLI_NAMES[dtype.lower()]
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d is None or d not in _FLOATS:
        raise DtypeError(f"dtype {dtype!r} is not supported: pass float32 or float64 "
                        "(numpy.float32, numpy.float64, \"f32\", \"f64\")")
    return d.name


def _index32(a, what):
    """An index array as int32: itself when it is int32, else a checked copy (the indices, not
    the values: int64 indices of a matrix that fits 32 bits)."""
    a = np.asarray(a)
    if a.dtype == np.int32:
        return np.ascontiguousarray(a)
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{what} has dtype {a.dtype}, expected integers")
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
    check_values_dtype(A.dtype, "A")  # float32 or float64: the Matrix's dtype is A's
    rows, cols = (int(n) for n in A.shape)
    if A.format == "csr" and A.has_canonical_format:
        # The arrays themselves (waco::Matrix::from_csr checks and copies them once).
        indptr = A.indptr if A.indptr.dtype in (np.int32, np.int64) else A.indptr.astype(np.int64)
        return Matrix._from_csr(rows, cols, indptr, _index32(A.indices, "A.indices"), A.data)
    coo = A.tocoo(copy=False)
    return Matrix._from_coo(rows, cols, _index32(coo.row, "A.row"), _index32(coo.col, "A.col"),
                            np.ascontiguousarray(coo.data))
