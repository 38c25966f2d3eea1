// The measurement processes' messages (measure.cpp): frames on Unix stream sockets, one type
// byte, a 32-bit length, then the payload (JSON text). Sockets rather than pipes so that writes
// can use MSG_NOSIGNAL: a peer that died is an error value, never a SIGPIPE. Private to
// heuristics/src.
#pragma once

#include <string>

namespace waco::heuristics::detail {

enum class ReadStatus { Ok, Eof, Timeout };

/// Writes one frame; false when the peer is gone.
bool write_frame(int fd, char type, const std::string& payload);
/// Reads one frame before `deadline` (kernels::now_seconds() scale; < 0 = no deadline).
ReadStatus read_frame(int fd, double deadline, char& type, std::string& payload);

}  // namespace waco::heuristics::detail
