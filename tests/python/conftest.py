"""Shared fixtures of the Python tests (tests/CMakeLists.txt runs them with PYTHONPATH at the
build tree's python/ folder, XDG_CACHE_HOME in its test scratch, WACO_HYBRID the CLI and
WACO_SOURCE_DIR the source tree)."""

import os
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp

SOURCE_DIR = pathlib.Path(os.environ.get("WACO_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
EXAMPLE = SOURCE_DIR / "examples" / "bcsstk13.mtx.gz"


@pytest.fixture
def scratch(tmp_path):
    """A folder for this test's tuning cache, plans and databases."""
    return tmp_path


def random_csr(rows, cols, density, seed, empty_rows=(1,), dtype=np.float32):
    """A seeded CSR matrix (canonical, int32 indices) with some empty rows, its values uniform in
    [-1, 1) drawn in dtype (float64: values of full double precision, most not representable in
    float32)."""
    rng = np.random.default_rng(seed)
    A = sp.random(rows, cols, density=density, format="lil", dtype=np.float32, random_state=rng)
    for r in empty_rows:
        A[r, :] = 0
    A = sp.csr_matrix(A)
    A.data = (rng.random(A.nnz, dtype=dtype) * 2 - 1).astype(dtype)
    A.sort_indices()
    return A


def vector(n, seed, dtype=np.float32):
    return (np.random.default_rng(seed).random(n, dtype=dtype) * 2 - 1).astype(dtype)


def matrix(rows, cols, seed, dtype=np.float32):
    return (np.random.default_rng(seed).random((rows, cols), dtype=dtype) * 2 - 1).astype(dtype)
