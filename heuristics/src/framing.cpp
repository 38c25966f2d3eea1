// Frames on Unix stream sockets (framing.hpp).
#include "framing.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "waco/kernels/timing.hpp"

namespace waco::heuristics::detail {

using kernels::now_seconds;

namespace {

/// Writes all of buf; false when the peer is gone.
bool send_all(int fd, const char* buf, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, buf, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    buf += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

/// Reads exactly n bytes before `deadline` (now_seconds() scale; < 0 = no deadline).
ReadStatus read_all(int fd, char* buf, std::size_t n, double deadline) {
  while (n > 0) {
    int wait_ms = -1;
    if (deadline >= 0) {
      const double left = deadline - now_seconds();
      if (left <= 0) return ReadStatus::Timeout;
      wait_ms = static_cast<int>(std::ceil(left * 1000.0));
    }
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return ReadStatus::Eof;
    }
    if (pr == 0) continue;  // the deadline check above decides
    const ssize_t r = ::read(fd, buf, n);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ReadStatus::Eof;
    }
    if (r == 0) return ReadStatus::Eof;
    buf += r;
    n -= static_cast<std::size_t>(r);
  }
  return ReadStatus::Ok;
}

}  // namespace

bool write_frame(int fd, char type, const std::string& payload) {
  char header[5];
  header[0] = type;
  const std::uint32_t len = static_cast<std::uint32_t>(payload.size());
  std::memcpy(header + 1, &len, 4);
  return send_all(fd, header, 5) && send_all(fd, payload.data(), payload.size());
}

ReadStatus read_frame(int fd, double deadline, char& type, std::string& payload) {
  char header[5];
  ReadStatus st = read_all(fd, header, 5, deadline);
  if (st != ReadStatus::Ok) return st;
  type = header[0];
  std::uint32_t len = 0;
  std::memcpy(&len, header + 1, 4);
  payload.assign(len, '\0');
  return len == 0 ? ReadStatus::Ok : read_all(fd, payload.data(), len, deadline);
}

}  // namespace waco::heuristics::detail
