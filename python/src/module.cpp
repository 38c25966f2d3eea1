// waco_hybrid._waco: the C++ API of waco/waco.hpp for Python (pybind11), and nothing more: the
// operand (waco::Matrix), tune and make_plan, and the Plan's kernels on NumPy arrays. The SciPy
// conversion, the option defaults and the readers of the results live in the Python package
// (waco_hybrid/*.py).
//
// Arrays are never converted here: a matrix's values are float32 or float64 (a waco::Matrix of
// Dtype::F32 or F64), and a dense operand must already be a C-contiguous ndarray of the plan's
// dtype (its matrix's) and of the right shape (else TypeError for the dtype, ValueError for shape
// and order), so no call copies a large array behind the caller's back. The GIL is released
// while a matrix is built, while tuning, and while a kernel runs.
#include <dlfcn.h>
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "waco/waco.hpp"

#ifndef WACO_SOURCE_DATASET_DIR
#define WACO_SOURCE_DATASET_DIR ""
#endif

namespace py = pybind11;
namespace fs = std::filesystem;

namespace {

/// A plan and the operand it was made for (its shape checks every call's arrays).
struct PyPlan {
  waco::Plan plan;
  waco::Matrix A;
};

waco::Kernel parse_kernel(const std::string& name) {
  for (waco::Kernel k : {waco::Kernel::SpMV, waco::Kernel::SpMM, waco::Kernel::SDDMM,
                         waco::Kernel::MTTKRP})
    if (name == waco::kernel_name(k)) return k;
  throw py::value_error("unknown kernel '" + name + "': spmv, spmm, sddmm or mttkrp");
}

std::vector<std::int64_t> shape_of(const py::array& a) {
  return std::vector<std::int64_t>(a.shape(), a.shape() + a.ndim());
}

/// NumPy's name of a waco dtype: "float32" or "float64".
const char* numpy_name(waco::Dtype d) { return d == waco::Dtype::F64 ? "float64" : "float32"; }

/// waco_hybrid.DtypeError: a wrong dtype, both a TypeError (as NumPy's) and a ValueError (as the
/// shape and order checks), so that either `except` catches it. Made in PYBIND11_MODULE.
PyObject* g_dtype_error = nullptr;

[[noreturn]] void throw_dtype_error(const std::string& what) {
  PyErr_SetString(g_dtype_error, what.c_str());
  throw py::error_already_set();
}

/// "float32"/"f32" or "float64"/"f64" (the Python side passes NumPy's names).
waco::Dtype parse_dtype(const std::string& name) {
  if (name == "float32" || name == "f32") return waco::Dtype::F32;
  if (name == "float64" || name == "f64") return waco::Dtype::F64;
  throw_dtype_error("dtype '" + name + "' is not supported: pass float32 or float64");
}

/// Whether a's elements are T in the machine's byte order (NumPy's equivalence, not the identity
/// of the dtype object: an equal descriptor that is not NumPy's cached one is accepted).
template <typename T>
bool has_dtype(const py::array& a) {
  return py::detail::npy_api::get().PyArray_EquivTypes_(a.dtype().ptr(),
                                                         py::dtype::of<T>().ptr());
}

/// Calls f(float{}) or f(double{}) for F32 or F64: the typed body of a dtype-generic call.
template <class F>
decltype(auto) by_dtype(waco::Dtype d, F&& f) {
  if (d == waco::Dtype::F64) return f(double{});
  return f(float{});
}

/// The dtype check of every dense array: the plan's dtype (its matrix's) and nothing else; the
/// other float type is named with how to convert it (nothing is converted here).
void check_dtype(const py::array& a, const std::string& what, waco::Dtype want) {
  const bool f64 = want == waco::Dtype::F64;
  if (f64 ? has_dtype<double>(a) : has_dtype<float>(a)) return;
  const std::string name = numpy_name(want);
  if (f64 ? has_dtype<float>(a) : has_dtype<double>(a)) {
    const std::string other = numpy_name(f64 ? waco::Dtype::F32 : waco::Dtype::F64);
    throw_dtype_error(what + " is " + other + ", this plan computes in " + name +
                         " (its matrix holds " + name + " values): pass " + what +
                         ".astype(numpy." + name + "), a " + name +
                         " copy, or use a plan of a matrix of " + other + " values");
  }
  throw_dtype_error(what + " has dtype " + std::string(py::str(a.dtype())) +
                       ", this plan computes in " + name + ": pass " + what + ".astype(numpy." +
                       name + ")");
}

/// The checks of a dense operand: an ndarray of this dtype, C-contiguous, aligned, of this shape
/// (-1: any size). Returns it as a py::array (never a converted copy).
py::array dense(const py::handle& obj, const std::string& what,
                const std::vector<std::int64_t>& want, waco::Dtype dtype, bool writable = false) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(what + " must be a numpy.ndarray of " + numpy_name(dtype) + ", not " +
                         std::string(py::str(obj.get_type().attr("__name__"))));
  py::array a = py::reinterpret_borrow<py::array>(obj);
  check_dtype(a, what, dtype);
  const std::vector<std::int64_t> got = shape_of(a);
  bool ok = got.size() == want.size();
  for (std::size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 || want[i] == got[i];
  if (!ok) {
    std::string expect = "(";
    for (std::size_t i = 0; i < want.size(); ++i)
      expect += (want[i] < 0 ? std::string("n") : std::to_string(want[i])) +
                (want.size() == 1 ? "," : i + 1 < want.size() ? ", " : "");
    std::string have = "(";
    for (std::size_t i = 0; i < got.size(); ++i)
      have += std::to_string(got[i]) + (got.size() == 1 ? "," : i + 1 < got.size() ? ", " : "");
    throw py::value_error(what + " has shape " + have + "), this plan needs " + expect + ")");
  }
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(what + " is not C-contiguous (a transposed, sliced or Fortran-order "
                                 "array): pass numpy.ascontiguousarray(" +
                          what + "), a copy");
  if (!(a.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
    throw py::value_error(what + " is not aligned: pass a copy (" + what + ".copy())");
  if (writable && !a.writeable()) throw py::value_error(what + " is read-only");
  return a;
}

/// Output arrays must not overlap the inputs (the kernel reads them while writing it).
void check_disjoint(const py::array& out, const std::vector<const py::array*>& inputs) {
  const auto* o0 = static_cast<const char*>(out.data());
  const auto* o1 = o0 + out.nbytes();
  for (const py::array* in : inputs) {
    const auto* i0 = static_cast<const char*>(in->data());
    const auto* i1 = i0 + in->nbytes();
    if (o0 < i1 && i0 < o1 && out.nbytes() > 0 && in->nbytes() > 0)
      throw py::value_error("out overlaps an input array: pass a separate output array");
  }
}

/// out when given (checked: the plan's dtype), else a new array of that shape and dtype.
py::array output(const py::object& out, const std::vector<std::int64_t>& shape, waco::Dtype dtype) {
  if (out.is_none())
    return by_dtype(dtype, [&](auto v) -> py::array { return py::array_t<decltype(v)>(shape); });
  return dense(out, "out", shape, dtype, /*writable=*/true);
}

template <class V>
V* vdata(py::array& a) { return static_cast<V*>(a.mutable_data()); }
template <class V>
const V* vdata(const py::array& a) { return static_cast<const V*>(a.data()); }

/// A 1-D index array of exactly this dtype, contiguous, n entries (the sparse arrays).
template <typename T>
const T* index_array(const py::array& a, const char* what, std::int64_t n) {
  if (!has_dtype<T>(a))
    throw_dtype_error(std::string(what) + " has dtype " + std::string(py::str(a.dtype())) +
                      ", expected " + std::string(py::str(py::dtype::of<T>())));
  if (a.ndim() != 1 || a.shape(0) != n)
    throw py::value_error(std::string(what) + " must be 1-D with " + std::to_string(n) +
                          " entries");
  if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string(what) + " is not contiguous");
  return static_cast<const T*>(a.data());
}

/// A matrix's values: None (a pattern, every value 1, of the dtype `pattern`) or a 1-D ndarray of
/// nnz float32 or float64 values, whose dtype the matrix takes. Calls make(values) with a
/// `const float*` or `const double*` (null for a pattern).
template <class F>
waco::Matrix with_values(const py::object& v, const std::string& what, std::int64_t nnz,
                         waco::Dtype pattern, F&& make) {
  if (v.is_none())
    return by_dtype(pattern,
                    [&](auto z) { return make(static_cast<const decltype(z)*>(nullptr)); });
  if (!py::isinstance<py::array>(v))
    throw py::type_error(what + " must be a numpy.ndarray of float32 or float64, not " +
                         std::string(py::str(v.get_type().attr("__name__"))));
  const py::array a = py::reinterpret_borrow<py::array>(v);
  waco::Dtype d = waco::Dtype::F32;
  if (has_dtype<double>(a)) d = waco::Dtype::F64;
  else if (!has_dtype<float>(a))
    throw_dtype_error(what + " has dtype " + std::string(py::str(a.dtype())) +
                         ", waco-hybrid holds float32 or float64 values: pass " + what +
                         ".astype(numpy.float32) or " + what + ".astype(numpy.float64)");
  const py::array checked = dense(v, what, {nnz}, d);
  return by_dtype(d, [&](auto z) { return make(vdata<decltype(z)>(checked)); });
}

waco::Matrix from_csr(std::int64_t rows, std::int64_t cols, const py::array& indptr,
                      const py::array& indices, const py::object& data) {
  if (rows < 0) throw py::value_error("rows is negative");
  const std::int64_t nnz = indices.ndim() == 1 ? indices.shape(0) : -1;
  const std::int32_t* col = index_array<std::int32_t>(indices, "indices", nnz);
  if (data.is_none()) throw py::type_error("data must be a numpy.ndarray of float32 or float64");
  if (indptr.ndim() != 1 || indptr.shape(0) != rows + 1)
    throw py::value_error("indptr must be 1-D with rows + 1 = " + std::to_string(rows + 1) +
                          " entries");
  const auto build = [&](const auto* ptr) {
    if (ptr[rows] != nnz) throw py::value_error("indptr[rows] is not the length of indices");
    return with_values(data, "data", nnz, waco::Dtype::F32, [&](const auto* val) {
      py::gil_scoped_release nogil;
      return waco::Matrix::from_csr(rows, cols, ptr, col, val);
    });
  };
  if (has_dtype<std::int64_t>(indptr))
    return build(index_array<std::int64_t>(indptr, "indptr", rows + 1));
  return build(index_array<std::int32_t>(indptr, "indptr", rows + 1));
}

waco::Matrix from_coo(std::int64_t rows, std::int64_t cols, const py::array& row,
                      const py::array& col, const py::object& data, const std::string& dtype) {
  const std::int64_t nnz = row.ndim() == 1 ? row.shape(0) : -1;
  const auto* r = index_array<std::int32_t>(row, "row", nnz);
  const auto* c = index_array<std::int32_t>(col, "col", nnz);
  return with_values(data, "data", nnz, parse_dtype(dtype), [&](const auto* v) {
    py::gil_scoped_release nogil;
    return waco::Matrix::from_coo(rows, cols, nnz, r, c, v);
  });
}

waco::Matrix tensor_from_coo(const std::vector<std::int64_t>& dims, const py::array& coords,
                             const py::object& values, const std::string& dtype) {
  if (dims.size() != 3) throw py::value_error("a tensor has 3 dimensions, shape has " +
                                              std::to_string(dims.size()));
  if (!has_dtype<std::int32_t>(coords))
    throw_dtype_error("coords has dtype " + std::string(py::str(coords.dtype())) +
                      ", expected int32");
  if (coords.ndim() != 2 || coords.shape(0) != 3 || !(coords.flags() & py::array::c_style))
    throw py::value_error("coords must be a C-contiguous 3 x nnz int32 array (one row a mode)");
  const std::int64_t nnz = coords.shape(1);
  const auto* idx = static_cast<const std::int32_t*>(coords.data());
  return with_values(values, "values", nnz, parse_dtype(dtype), [&](const auto* v) {
    py::gil_scoped_release nogil;
    return waco::Matrix::tensor_from_coo(dims.data(), nnz, idx, idx + nnz, idx + 2 * nnz, v);
  });
}

py::tuple matrix_shape(const waco::Matrix& A) {
  return A.order() == 3 ? py::make_tuple(A.dim(0), A.dim(1), A.dim(2))
                        : py::make_tuple(A.rows(), A.cols());
}

/// A Python exception that stops a tune (Ctrl-C): what PyErr_CheckSignals raised while the tune
/// asked Options::interrupt (KeyboardInterrupt, or what the program's own signal handler
/// raised), or a KeyboardInterrupt or SystemExit that came out of the progress callback (Python
/// runs its signal handlers in whatever Python code runs, the callback too). Raised once tune
/// returns; it is touched with the GIL held only.
struct Pending {
  std::optional<py::error_already_set> error;
};

/// The settings of waco::Options' last group (`waco-hybrid tune`'s options of the same names):
/// false when `key` is none of them. Paths may be str or os.PathLike.
bool set_setting(waco::Options& o, const std::string& key, const py::handle& v) {
  const std::pair<const char*, std::string waco::Options::*> paths[] = {
      {"model", &waco::Options::model}, {"index", &waco::Options::index},
      {"schedules", &waco::Options::schedules}, {"compiler", &waco::Options::compiler}};
  const std::pair<const char*, std::string waco::Options::*> names[] = {
      {"race", &waco::Options::race}, {"cache_level", &waco::Options::cache_level}};
  const std::pair<const char*, bool waco::Options::*> flags[] = {
      {"check_recall", &waco::Options::check_recall}, {"explain", &waco::Options::explain},
      {"measure_first", &waco::Options::measure_first},
      {"decide_always", &waco::Options::decide_always},
      {"decide_together", &waco::Options::decide_together},
      {"retry_failed", &waco::Options::retry_failed},
      {"no_calibration", &waco::Options::no_calibration}};
  const std::pair<const char*, std::optional<int> waco::Options::*> ints[] = {
      {"repeat", &waco::Options::repeat}, {"warmup", &waco::Options::warmup},
      {"confirm_rounds", &waco::Options::confirm_rounds},
      {"decide_runs", &waco::Options::decide_runs},
      {"decide_extra_runs", &waco::Options::decide_extra_runs},
      {"per_structure", &waco::Options::per_structure},
      {"layouts", &waco::Options::layouts},
      {"decide_rounds", &waco::Options::decide_rounds},
      {"decide_leaders", &waco::Options::decide_leaders},
      {"halving_keep", &waco::Options::halving_keep},
      {"tile_window", &waco::Options::tile_window},
      {"min_chunks_per_thread", &waco::Options::min_chunks_per_thread},
      {"chunk_window", &waco::Options::chunk_window}};
  const std::pair<const char*, std::optional<std::int64_t> waco::Options::*> longs[] = {
      {"max_serial_work", &waco::Options::max_serial_work},
      {"cache_bytes", &waco::Options::cache_bytes},
      {"side_by_side_memory", &waco::Options::side_by_side_memory}};
  const std::pair<const char*, std::optional<double> waco::Options::*> reals[] = {
      {"min_gain", &waco::Options::min_gain}, {"verdict_level", &waco::Options::verdict_level},
      {"decide_drop", &waco::Options::decide_drop},
      {"decide_clear", &waco::Options::decide_clear},
      {"max_disturbed", &waco::Options::max_disturbed}, {"timeout", &waco::Options::timeout},
      {"compile_timeout", &waco::Options::compile_timeout},
      {"tolerance", &waco::Options::tolerance},
      {"abandon_factor", &waco::Options::abandon_factor},
      {"max_padding", &waco::Options::max_padding},
      {"max_block_padding", &waco::Options::max_block_padding},
      {"cache_fraction", &waco::Options::cache_fraction}};
  for (const auto& [name, field] : paths)
    if (key == name) {
      o.*field = v.cast<fs::path>().string();
      return true;
    }
  for (const auto& [name, field] : names)
    if (key == name) {
      o.*field = v.cast<std::string>();
      return true;
    }
  for (const auto& [name, field] : flags)
    if (key == name) {
      o.*field = v.cast<bool>();
      return true;
    }
  for (const auto& [name, field] : ints)
    if (key == name) {
      o.*field = v.cast<int>();
      return true;
    }
  for (const auto& [name, field] : longs)
    if (key == name) {
      o.*field = v.cast<std::int64_t>();
      return true;
    }
  for (const auto& [name, field] : reals)
    if (key == name) {
      o.*field = v.cast<double>();
      return true;
    }
  return false;
}

/// waco::Options from the keyword arguments of waco_hybrid.tune / make_plan (already defaulted
/// by the Python side); an unknown key is a TypeError. `pending`: where the progress callback
/// puts a KeyboardInterrupt or SystemExit raised in it (tune; null: reported as unraisable).
waco::Options options_from(const py::dict& kw, Pending* pending = nullptr) {
  waco::Options o;
  for (const auto& item : kw) {
    const std::string key = py::str(item.first);
    const py::handle v = item.second;
    if (key == "threads") o.threads = v.cast<int>();
    else if (key == "search") o.search = v.cast<std::string>();
    else if (key == "budget") o.budget = v.cast<int>();
    else if (key == "budget_seconds") o.budget_seconds = v.cast<double>();
    else if (key == "expected_calls") o.expected_calls = v.cast<std::int64_t>();
    else if (key == "tuning_share") o.tuning_share = v.cast<double>();
    else if (key == "dense") o.dense = v.cast<int>();
    else if (key == "cache_dir") o.cache_dir = v.cast<fs::path>().string();
    else if (key == "use_cache") o.use_cache = v.cast<bool>();
    else if (key == "refresh") o.refresh = v.cast<bool>();
    else if (key == "kernel_cache_dir") o.kernel_cache_dir = v.cast<fs::path>().string();
    else if (key == "verbose") o.verbose = v.cast<bool>();
    else if (key == "passes") o.passes = v.cast<std::string>();
    else if (key == "confirm") o.confirm = v.cast<int>();
    else if (key == "seed") o.seed = v.cast<std::uint64_t>();
    else if (key == "results_db") o.results_db = v.cast<fs::path>().string();
    else if (key == "adaptive") o.adaptive = v.cast<bool>();
    else if (key == "nominees") o.nominees = v.cast<int>();
    else if (key == "check_in_process") o.check_in_process = v.cast<bool>();
    else if (set_setting(o, key, v)) continue;
    else if (key == "progress") {
      if (v.is_none()) continue;
      if (!PyCallable_Check(v.ptr())) throw py::type_error("progress must be callable or None");
      // Called from the tuning thread (the caller's, GIL released): take the GIL for the call;
      // an exception in it is reported as unraisable and tuning goes on, except a
      // KeyboardInterrupt or SystemExit (not an Exception), which stops the tune (Pending). The
      // object outlives the call (it is an argument of it), so a borrowed pointer is safe.
      PyObject* fn = v.ptr();
      o.progress = [fn, pending](const std::string& line) {
        py::gil_scoped_acquire gil;
        try {
          py::reinterpret_borrow<py::object>(fn)(line);
        } catch (py::error_already_set& e) {
          if (pending != nullptr && !e.matches(PyExc_Exception)) {
            if (!pending->error) pending->error = std::move(e);
            return;
          }
          e.discard_as_unraisable("waco_hybrid progress callback");
        }
      };
    } else {
      throw py::type_error("unknown option '" + key + "'");
    }
  }
  return o;
}

/// Where the committed dataset is: share/waco-hybrid/dataset beside the libwaco.so this module
/// loaded (an installed prefix), else the source tree's data/dataset (a build tree), as the
/// library finds its shipped files (learned/src/shipped.cpp).
std::string dataset_dir() {
  Dl_info info{};
  std::error_code ec;
  if (::dladdr(reinterpret_cast<void*>(&waco::version), &info) != 0 && info.dli_fname != nullptr) {
    const fs::path lib = fs::canonical(fs::path(info.dli_fname), ec);
    if (!ec) {
      const fs::path installed = lib.parent_path().parent_path() / "share" / "waco-hybrid" / "dataset";
      if (fs::is_directory(installed, ec)) return installed.string();
    }
  }
  return WACO_SOURCE_DATASET_DIR;
}

py::object parse_json(const std::string& text) {
  return py::module_::import("json").attr("loads")(text);
}

void check_kernel(const PyPlan& p, waco::Kernel k, const char* use) {
  if (p.plan.kernel() != k)
    throw py::value_error(std::string("this plan runs ") + waco::kernel_name(p.plan.kernel()) +
                          ", not " + waco::kernel_name(k) + use);
}

// ------------------------------------------------------------------------------------------------
// The kernels. Each checks its arrays against the plan's operand and dtype (the arrays' pointers
// are then of the plan's value type V) and runs with the GIL released.

py::array run_spmv(const PyPlan& p, const py::handle& x_obj, const py::object& out) {
  check_kernel(p, waco::Kernel::SpMV, "");
  const waco::Dtype dt = p.plan.dtype();
  const py::array x = dense(x_obj, "x", {p.A.cols()}, dt);
  py::array y = output(out, {p.A.rows()}, dt);
  check_disjoint(y, {&x});
  by_dtype(dt, [&](auto z) {
    using V = decltype(z);
    py::gil_scoped_release nogil;
    p.plan.spmv(vdata<V>(x), vdata<V>(y));
  });
  return y;
}

py::array run_spmm(const PyPlan& p, const py::handle& b_obj, const py::object& out) {
  check_kernel(p, waco::Kernel::SpMM, "");
  const waco::Dtype dt = p.plan.dtype();
  const py::array B = dense(b_obj, "B", {p.A.cols(), -1}, dt);
  const std::int64_t n = B.shape(1);
  if (n < 1) throw py::value_error("B has 0 columns; at least 1");
  py::array C = output(out, {p.A.rows(), n}, dt);
  check_disjoint(C, {&B});
  by_dtype(dt, [&](auto z) {
    using V = decltype(z);
    py::gil_scoped_release nogil;
    p.plan.spmm(n, vdata<V>(B), n, vdata<V>(C), n);
  });
  return C;
}

py::array run_sddmm(const PyPlan& p, const py::handle& u_obj, const py::handle& v_obj,
                    const py::object& out) {
  check_kernel(p, waco::Kernel::SDDMM, "");
  const waco::Dtype dt = p.plan.dtype();
  const py::array U = dense(u_obj, "U", {p.A.rows(), -1}, dt);
  const std::int64_t k = U.shape(1);
  if (k < 1) throw py::value_error("U has 0 columns; at least 1");
  const py::array V = dense(v_obj, "V", {p.A.cols(), k}, dt);
  py::array o = output(out, {p.A.nnz()}, dt);
  check_disjoint(o, {&U, &V});
  by_dtype(dt, [&](auto z) {
    using T = decltype(z);
    py::gil_scoped_release nogil;
    p.plan.sddmm(k, vdata<T>(U), k, vdata<T>(V), k, vdata<T>(o));
  });
  return o;
}

py::array run_mttkrp(const PyPlan& p, const py::handle& b_obj, const py::handle& c_obj,
                     const py::object& out) {
  check_kernel(p, waco::Kernel::MTTKRP, "");
  const waco::Dtype dt = p.plan.dtype();
  const py::array B = dense(b_obj, "B", {p.A.dim(1), -1}, dt);
  const std::int64_t n = B.shape(1);
  if (n < 1) throw py::value_error("B has 0 columns; at least 1");
  const py::array C = dense(c_obj, "C", {p.A.dim(2), n}, dt);
  py::array o = output(out, {p.A.dim(0), n}, dt);
  check_disjoint(o, {&B, &C});
  by_dtype(dt, [&](auto z) {
    using V = decltype(z);
    py::gil_scoped_release nogil;
    p.plan.mttkrp(n, vdata<V>(B), n, vdata<V>(C), n, vdata<V>(o), n);
  });
  return o;
}


}  // namespace

PYBIND11_MODULE(_waco, m) {
  m.doc() = "waco-hybrid's C++ API (waco/waco.hpp) for Python; use the waco_hybrid package";

  // waco_hybrid.DtypeError(TypeError, ValueError): see throw_dtype_error.
  g_dtype_error = PyErr_NewExceptionWithDoc(
      "waco_hybrid.DtypeError",
      "An array of the wrong dtype (the message says which to pass); both a TypeError, as NumPy "
      "raises, and a ValueError, as the shape and order checks raise.",
      py::make_tuple(py::handle(PyExc_TypeError), py::handle(PyExc_ValueError)).release().ptr(),
      nullptr);
  if (!g_dtype_error) throw py::error_already_set();
  m.attr("DtypeError") = py::handle(g_dtype_error);

  // waco_hybrid.Error: the C++ message as str(e) and e.message, the hint as e.hint.
  static py::exception<waco::Error> error(m, "Error", PyExc_RuntimeError);
  error.attr("hint") = "";
  error.attr("__module__") = "waco_hybrid";
  error.attr("__doc__") =
      "An error of waco-hybrid: str(e) is the message the waco-hybrid CLI prints, e.hint what "
      "to do about it (may be empty).";
  py::register_exception_translator([](std::exception_ptr ep) {
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const waco::Error& e) {
      py::object inst = py::handle(error.ptr())(py::str(e.what()));
      inst.attr("hint") = py::str(e.hint());
      inst.attr("message") = py::str(e.what());
      PyErr_SetObject(error.ptr(), inst.ptr());
    }
  });

  m.def("version", [] { return std::string(waco::version()); }, "waco-hybrid's version");
  m.def("_dataset_dir", &dataset_dir, "the folder of the committed dataset exports");

  py::class_<waco::Matrix>(m, "Matrix",
                           "A sparse matrix or 3-D tensor held by waco-hybrid: canonical (sorted, "
                           "one entry per coordinate), owned, cheap to share between plans. Made "
                           "by waco_hybrid.matrix(A), tensor(...) or load(path).")
      .def_static("_from_csr", &from_csr, py::arg("rows"), py::arg("cols"), py::arg("indptr"),
                  py::arg("indices"), py::arg("data"))
      .def_static("_from_coo", &from_coo, py::arg("rows"), py::arg("cols"), py::arg("row"),
                  py::arg("col"), py::arg("data"), py::arg("dtype") = "float32")
      .def_static("_tensor", &tensor_from_coo, py::arg("shape"), py::arg("coords"),
                  py::arg("values"), py::arg("dtype") = "float32")
      .def_static(
          "_from_file",
          [](const fs::path& path, const std::string& dtype) {
            const waco::Dtype d = parse_dtype(dtype);
            py::gil_scoped_release nogil;
            return waco::Matrix::from_file(path.string(), d);
          },
          py::arg("path"), py::arg("dtype") = "float32")
      .def_property_readonly("order", &waco::Matrix::order, "2 for a matrix, 3 for a tensor")
      .def_property_readonly("shape", &matrix_shape)
      .def_property_readonly("nnz", &waco::Matrix::nnz, "stored entries after canonicalization")
      .def_property_readonly("fingerprint", &waco::Matrix::fingerprint,
                             "the content fingerprint naming it in the tuning cache and results")
      .def_property_readonly(
          "dtype", [](const waco::Matrix& A) { return numpy_name(A.dtype()); },
          "\"float32\" or \"float64\": the values' type, and the type its plans compute in")
      .def(
          "csr_arrays",
          [](const waco::Matrix& A) {
            if (A.order() != 2) throw py::value_error("csr_arrays: a 3-D tensor has no CSR form");
            py::array_t<std::int64_t> indptr(A.rows() + 1);
            py::array_t<std::int32_t> indices(A.nnz());
            return by_dtype(A.dtype(), [&](auto z) {
              py::array_t<decltype(z)> data(A.nnz());
              A.csr(indptr.mutable_data(), indices.mutable_data(), data.mutable_data());
              return py::make_tuple(indptr, indices, data);
            });
          },
          "(indptr int64, indices int32, data of the matrix's dtype): the canonical CSR arrays "
          "(copies)")
      .def("__repr__", [](const waco::Matrix& A) {
        std::string dims;
        for (int d = 0; d < A.order(); ++d) dims += (d ? " x " : "") + std::to_string(A.dim(d));
        return "<waco_hybrid.Matrix " + dims + ", " + std::to_string(A.nnz()) + " nonzeros, " +
               numpy_name(A.dtype()) + ", " + A.fingerprint() + ">";
      });

  m.def(
      "_tune",
      [](const waco::Matrix& A, const std::string& kernel, const py::dict& kw) {
        const waco::Kernel k = parse_kernel(kernel);
        Pending pending;
        waco::Options o = options_from(kw, &pending);
        // Ctrl-C: tune asks this about every 0.1 s from this thread (GIL released); Python's
        // signal handlers run here for a moment with the GIL, and an exception one raises
        // stops the tune (its processes killed, nothing half-stored) and is raised below. In a
        // thread other than the main one PyErr_CheckSignals does nothing, as Python's signals.
        o.interrupt = [&pending] {
          py::gil_scoped_acquire gil;
          if (!pending.error && PyErr_CheckSignals() != 0) pending.error.emplace();  // fetched
          return pending.error.has_value();
        };
        std::optional<waco::Plan> plan;
        try {
          py::gil_scoped_release nogil;
          plan = waco::tune(A, k, o);
        } catch (const waco::Interrupted&) {
          if (!pending.error) throw;
        }
        if (pending.error) throw py::error_already_set(*pending.error);
        return PyPlan{*plan, A};
      },
      py::arg("A"), py::arg("kernel"), py::arg("options"));
  m.def(
      "_make_plan",
      [](const waco::Matrix& A, const std::string& kernel, const std::string& schedule,
         const py::dict& kw) {
        const waco::Kernel k = parse_kernel(kernel);
        const waco::Options o = options_from(kw);
        py::gil_scoped_release nogil;
        return PyPlan{waco::make_plan(A, k, schedule, o), A};
      },
      py::arg("A"), py::arg("kernel"), py::arg("schedule"), py::arg("options"));
  m.def(
      "_load_plan",
      [](const fs::path& path, const waco::Matrix& A, const py::dict& kw) {
        const waco::Options o = options_from(kw);
        py::gil_scoped_release nogil;
        return PyPlan{waco::Plan::load(path.string(), A, o), A};
      },
      py::arg("path"), py::arg("A"), py::arg("options"));

  py::class_<PyPlan>(m, "Plan",
                     "A tuned kernel for one matrix (waco_hybrid.tune or make_plan): the matrix "
                     "in the winning format and the compiled kernel, run on NumPy arrays of its "
                     "dtype (its matrix's: float32 or float64) with the GIL released.")
      .def_property_readonly("kernel", [](const PyPlan& p) { return waco::kernel_name(p.plan.kernel()); })
      .def_property_readonly("dtype", [](const PyPlan& p) { return numpy_name(p.plan.dtype()); },
                             "\"float32\" or \"float64\" (its matrix's): the dtype of the "
                             "arrays it takes and returns")
      .def_property_readonly("schedule", [](const PyPlan& p) { return p.plan.schedule(); },
                             "the winning schedule (waco-hybrid run --schedule text form; the "
                             "csr schedule when a hand-written baseline serves: see "
                             "implementation)")
      .def_property_readonly(
          "implementation", [](const PyPlan& p) { return p.plan.implementation(); },
          "what runs the calls: 'generated' (the schedule's kernel), 'csr' ('csf' for mttkrp: "
          "no schedule beat csr and the hand-written baseline ran faster than the csr schedule) "
          "or 'dia' (spmv: the diagonal-storage baseline beat csr); schedule is the csr "
          "schedule for the last two")
      .def_property_readonly("verdict", [](const PyPlan& p) { return p.plan.verdict(); },
                             "gain, no-gain, not-worth-it (csr runs) or given (make_plan)")
      .def_property_readonly("speedup", [](const PyPlan& p) { return p.plan.speedup(); },
                             "over the faster csr reference (the csr schedule or the hand-written "
                             "baseline), judged side by side on fresh runs when tuned (1 for csr, "
                             "0 unknown)")
      .def_property_readonly("break_even_calls",
                             [](const PyPlan& p) { return p.plan.break_even_calls(); },
                             "calls after which tuning paid for itself (negative: never/unknown)")
      .def_property_readonly("tuning_seconds", [](const PyPlan& p) { return p.plan.tuning_seconds(); })
      .def_property_readonly("from_cache", [](const PyPlan& p) { return p.plan.from_cache(); })
      .def_property_readonly("calls", [](const PyPlan& p) { return p.plan.calls(); },
                             "an adaptive plan's calls so far (0 for other plans)")
      .def_property_readonly("exploring_calls", [](const PyPlan& p) { return p.plan.exploring_calls(); },
                             "an adaptive plan's calls that ran or verified a nominee")
      .def_property_readonly("threads", [](const PyPlan& p) { return p.plan.threads(); })
      .def_property_readonly("dense", [](const PyPlan& p) { return p.plan.dense(); },
                             "the n (spmm, mttkrp) or k (sddmm) the plan was tuned for")
      .def_property_readonly("shape", [](const PyPlan& p) { return matrix_shape(p.A); })
      .def_property_readonly("matrix", [](const PyPlan& p) { return p.A; })
      .def_property_readonly("report", [](const PyPlan& p) { return parse_json(p.plan.report_json()); },
                             "the report of the tune that decided (tune --json) as a dict; None "
                             "for make_plan")
      .def("save", [](const PyPlan& p, const fs::path& path) { p.plan.save(path.string()); },
           py::arg("path"), "writes the decision as JSON (Plan.load reads it)")
      .def("standalone_header",
           [](const PyPlan& p, const std::string& name_space) {
             return p.plan.standalone_header(name_space);
           },
           py::arg("name_space") = "waco_tuned",
           "the drop-in C++ header of the kernel that serves (waco-hybrid tune -o): the kernel, a "
           "builder of its format from CSR arrays and the call, nothing of waco-hybrid needed")
      .def("spmv", &run_spmv, py::arg("x"), py::arg("out") = py::none(),
           "y = A x: x (cols,) of the plan's dtype, returns out (rows,) (new when None)")
      .def("spmm", &run_spmm, py::arg("B"), py::arg("out") = py::none(),
           "C = A B: B (cols, n) of the plan's dtype, returns out (rows, n) (new when None)")
      .def("sddmm", &run_sddmm, py::arg("U"), py::arg("V"), py::arg("out") = py::none(),
           "A .* (U V^T) at A's nonzeros: U (rows, k), V (cols, k); returns the nnz values in "
           "the canonical CSR order of A (A.matrix.csr_arrays())")
      .def("mttkrp", &run_mttkrp, py::arg("B"), py::arg("C"), py::arg("out") = py::none(),
           "out(i, j) = sum T(i, k, l) B(k, j) C(l, j): B (dim1, n), C (dim2, n), out (dim0, n)")
      .def("__matmul__",
           [](const PyPlan& p, const py::handle& x) -> py::array {
             const int nd = py::isinstance<py::array>(x) ? py::reinterpret_borrow<py::array>(x).ndim() : -1;
             if (nd == 2) {
               check_kernel(p, waco::Kernel::SpMM, " (plan @ B with a 2-D B needs an spmm plan)");
               return run_spmm(p, x, py::none());
             }
             check_kernel(p, waco::Kernel::SpMV, " (plan @ x with a 1-D x needs an spmv plan)");
             return run_spmv(p, x, py::none());
           })
      .def("__repr__", [](const PyPlan& p) {
        return "<waco_hybrid.Plan " + std::string(waco::kernel_name(p.plan.kernel())) + " " +
               numpy_name(p.plan.dtype()) + " '" + p.plan.schedule() + "' " + p.plan.verdict() +
               ">";
      });
}
