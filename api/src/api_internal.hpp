// What the API's sources share: the handles' insides and the translation of the libraries'
// errors into waco::Error. Private to the library.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "waco/codegen/generated_kernel.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/tune/tune.hpp"
#include "waco/waco.hpp"

namespace waco {

struct Matrix::Impl {
  std::shared_ptr<const kernels::CooMatrix> matrix;  ///< a matrix (canonical), or
  std::shared_ptr<const kernels::CooTensor> tensor;  ///< a 3-D tensor (canonical)
  kernels::Dtype dtype = kernels::Dtype::F32;  ///< of the values it was made from
  static Matrix wrap(std::shared_ptr<const Impl> impl) { return Matrix(std::move(impl)); }

  /// kernels::fingerprint_hex of the operand, computed when first asked (once, thread-safe). A
  /// serial hash chain of ~13 ns a nonzero, 57% of making a Matrix from CSR when it was taken
  /// there: an adaptive plan needs it only once it asks the tuning cache (fixed plans take it when
  /// bound, for save() and headers).
  const std::string& fingerprint() const {
    std::call_once(fingerprint_once_, [this] {
      fingerprint_ = matrix ? kernels::fingerprint_hex(*matrix) : kernels::fingerprint_hex(*tensor);
    });
    return fingerprint_;
  }
  /// kernels::content_key_hex of the operand (the tuning cache's key), computed when first asked.
  const std::string& content_key() const {
    std::call_once(content_once_, [this] {
      content_ = matrix ? kernels::content_key_hex(*matrix) : kernels::content_key_hex(*tensor);
    });
    return content_;
  }

 private:
  mutable std::once_flag fingerprint_once_, content_once_;
  mutable std::string fingerprint_, content_;
};

namespace api {

Matrix make_matrix(kernels::CooMatrix a, kernels::Dtype dtype);
Matrix make_tensor(kernels::CooTensor t, kernels::Dtype dtype);

/// A's sparse operand as the tune pipeline takes it (valid while A lives), without its
/// fingerprint (the pipeline's steps that need one compute it: Matrix::Impl::fingerprint).
inline tuning::TuneOperand arrays(const Matrix& A) {
  return {A.impl().matrix.get(), A.impl().tensor.get(), {}};
}
/// The same, with its fingerprint (computed now if it was not yet).
inline tuning::TuneOperand operand(const Matrix& A) {
  tuning::TuneOperand op = arrays(A);
  op.fingerprint = A.fingerprint();
  return op;
}

inline kernels::Dtype internal(Dtype d) {
  return d == Dtype::F64 ? kernels::Dtype::F64 : kernels::Dtype::F32;
}
inline Dtype external(kernels::Dtype d) {
  return d == kernels::Dtype::F64 ? Dtype::F64 : Dtype::F32;
}

/// Runs f, turning the libraries' errors into waco::Error (a broken internal invariant keeps
/// saying so).
template <typename F>
auto translate_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const kernels::Cancelled& e) {
    throw Interrupted(e.what(), "run the same call again to tune (a results database keeps the "
                                "measurements finished before)");
  } catch (const kernels::Error& e) {
    throw Error(e.what(), e.hint());
  } catch (const kernels::InternalError& e) {
    throw Error(std::string("internal error (a bug in waco-hybrid): ") + e.what(),
                "please report it with the operand and the options");
  }
}

}  // namespace api
}  // namespace waco
