// The measurement processes' messages (measure_internal.hpp): frames on Unix stream sockets, one
// type byte, a 64-bit length (host order: both ends are this build on this machine), then the
// payload: JSON text for requests and results, the binary problem of problem_wire.hpp for 'L'.
// Sockets rather than pipes so that writes can use MSG_NOSIGNAL: a peer that died is an error
// value, never a SIGPIPE. Private to heuristics/src.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace waco::heuristics::detail {

/// Ok; Eof: the peer is gone (or the socket failed); Timeout: the deadline passed; TooLarge: the
/// header announced more than the reader accepts (the stream is then out of step: stop reading).
enum class ReadStatus { Ok, Eof, Timeout, TooLarge };

/// Bytes in a frame header (type, length).
inline constexpr std::size_t kFrameHeader = 9;
/// What read_frame accepts by default: requests and results are far smaller.
inline constexpr std::uint64_t kMaxFrame = std::uint64_t{1} << 32;

/// Writes one frame; false when the peer is gone.
bool write_frame(int fd, char type, const std::string& payload);
/// Writes a frame header announcing `length` payload bytes, to be sent with write_bytes.
bool write_header(int fd, char type, std::uint64_t length);
/// Writes all n bytes; false when the peer is gone.
bool write_bytes(int fd, const void* data, std::size_t n);

/// Reads one frame before `deadline` (kernels::now_seconds() scale; < 0 = no deadline).
ReadStatus read_frame(int fd, double deadline, char& type, std::string& payload,
                      std::uint64_t max_length = kMaxFrame);
/// Reads a frame header only (the payload follows: read it with read_bytes).
ReadStatus read_header(int fd, double deadline, char& type, std::uint64_t& length);
/// Reads exactly n bytes before `deadline` (< 0 = none).
ReadStatus read_bytes(int fd, void* buf, std::size_t n, double deadline);

}  // namespace waco::heuristics::detail
