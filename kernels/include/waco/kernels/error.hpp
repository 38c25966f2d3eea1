// The error vocabulary of waco-hybrid (STYLE.md, "three tiers of errors").
//
// - waco::kernels::Error: a user error (bad input file, bad option, unwritable path). Thrown from
//   library code, caught only in main(), printed as "error: <what> (hint: <hint>)", exit status 1.
// - WACO_ASSERT: an internal invariant; when it fails it is a bug in waco-hybrid, never the user's.
// - waco::kernels::Cancelled: the caller's request to stop (the library's interrupt callback),
//   passed up unchanged.
// - Expected failures inside a search (an illegal schedule, a timeout) are values, not exceptions;
//   they live with the search code.
#pragma once

#include <stdexcept>
#include <string>

namespace waco::kernels {

/// A user-facing error: what went wrong (naming the file, line or option) and how to fix it.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, std::string hint = {})
      : std::runtime_error(what), hint_(std::move(hint)) {}
  /// How to fix it; may be empty.
  const std::string& hint() const noexcept { return hint_; }

 private:
  std::string hint_;
};

/// The caller asked the work to stop (a library caller's interrupt callback, e.g. Python's
/// Ctrl-C): not an error of the input. Thrown where the request is seen; the processes the work
/// started are ended first and nothing unfinished is stored.
class Cancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Thrown by WACO_ASSERT: a broken internal invariant (a bug), reported as such.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void assertion_failed(const char* condition, const char* file, int line,
                                   const std::string& message);

}  // namespace waco::kernels

/// Checks an internal invariant in every build type; throws InternalError ("this is a bug").
#define WACO_ASSERT(cond, msg)                                                          \
  do {                                                                                  \
    if (!(cond)) ::waco::kernels::assertion_failed(#cond, __FILE__, __LINE__, (msg));   \
  } while (0)
