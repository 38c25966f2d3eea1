// The problem in binary, for the measurement worker's 'L' frame (measure_internal.hpp): what a
// measuring child needs to build, run and verify candidates, namely the MeasureOptions (less the
// test hook), the sparse operand, the dense operands and the reference. No text: fixed-width
// numbers in host order (both ends are this build on this machine) and arrays as a 64-bit count
// followed by the raw elements. Every count is checked against the bytes the frame has left
// before anything is allocated, and the decoded problem is validated (shapes, bounds, canonical
// order, reference sizes), so a malformed or truncated frame is a WireError, never a crash.
// Private to heuristics/src.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "waco/heuristics/runner.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/reference.hpp"

namespace waco::heuristics::detail {

/// The frame's content is not a problem (a bad count, a value out of range, trailing bytes).
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// The peer closed the socket in the middle of the frame.
class WireTruncated : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A problem as the worker holds it, owning its operands (problem points into this object, so it
/// is neither copied nor moved).
struct LoadedProblem {
  kernels::CooMatrix matrix;
  kernels::CooTensor tensor;
  kernels::DenseOperands dense;
  kernels::Problem problem;
  kernels::Reference reference;
  MeasureOptions options;  ///< child_hook empty: a function cannot be sent
  int run_threads = 1;

  LoadedProblem() = default;
  LoadedProblem(const LoadedProblem&) = delete;
  LoadedProblem& operator=(const LoadedProblem&) = delete;
};

/// Bytes of the 'L' payload for these arguments. ref: the problem's reference, sent with it, or
/// nullptr: the worker computes it when it has read the problem (nothing of the size of the
/// output kept by the sender: SpMM's with J = 16 on a 4M-row matrix is 256 MB in f32).
std::uint64_t load_payload_size(const kernels::Problem& p, const kernels::Reference* ref,
                                const MeasureOptions& opts, int run_threads);
/// Sends the 'L' frame: header, then the arrays straight from the caller's vectors (no copy of
/// the operands). False when the peer is gone.
bool write_load_frame(int fd, const kernels::Problem& p, const kernels::Reference* ref,
                      const MeasureOptions& opts, int run_threads);
/// The 'L' payload in memory (for tests).
std::string encode_load(const kernels::Problem& p, const kernels::Reference* ref,
                        const MeasureOptions& opts, int run_threads);

/// Where a payload is read from: the rest of a frame on a socket (its header already read), or
/// bytes in memory.
class FrameSource {
 public:
  FrameSource(int fd, std::uint64_t length) : fd_(fd), left_(length) {}
  explicit FrameSource(const std::string& bytes)
      : mem_(bytes.data()), left_(bytes.size()) {}

  /// Reads n bytes of the payload; WireError when the payload has fewer left, WireTruncated
  /// when the socket closes first.
  void read(void* dst, std::uint64_t n);
  std::uint64_t left() const { return left_; }
  /// Reads and drops what is left of the payload (keeps the stream in step after a WireError);
  /// WireTruncated when the socket closes first.
  void drain();

 private:
  int fd_ = -1;
  const char* mem_ = nullptr;
  std::uint64_t left_ = 0;
};

/// Decodes a whole 'L' payload; throws WireError or WireTruncated (see FrameSource).
std::unique_ptr<LoadedProblem> read_load(FrameSource& in);

}  // namespace waco::heuristics::detail
