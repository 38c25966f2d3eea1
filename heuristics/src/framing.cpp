// Frames on Unix stream sockets (framing.hpp).
#include "framing.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "waco/kernels/timing.hpp"

namespace waco::heuristics::detail {

using kernels::now_seconds;

bool write_bytes(int fd, const void* data, std::size_t n) {
  const char* buf = static_cast<const char*>(data);
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

ReadStatus read_bytes(int fd, void* data, std::size_t n, double deadline) {
  char* buf = static_cast<char*>(data);
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

bool write_header(int fd, char type, std::uint64_t length) {
  char header[kFrameHeader];
  header[0] = type;
  std::memcpy(header + 1, &length, 8);
  return write_bytes(fd, header, kFrameHeader);
}

bool write_frame(int fd, char type, const std::string& payload) {
  return write_header(fd, type, payload.size()) && write_bytes(fd, payload.data(), payload.size());
}

ReadStatus read_header(int fd, double deadline, char& type, std::uint64_t& length) {
  char header[kFrameHeader];
  const ReadStatus st = read_bytes(fd, header, kFrameHeader, deadline);
  if (st != ReadStatus::Ok) return st;
  type = header[0];
  std::memcpy(&length, header + 1, 8);
  return ReadStatus::Ok;
}

ReadStatus read_frame(int fd, double deadline, char& type, std::string& payload,
                      std::uint64_t max_length) {
  std::uint64_t len = 0;
  const ReadStatus st = read_header(fd, deadline, type, len);
  if (st != ReadStatus::Ok) return st;
  if (len > max_length) return ReadStatus::TooLarge;
  payload.assign(static_cast<std::size_t>(len), '\0');
  return len == 0 ? ReadStatus::Ok : read_bytes(fd, payload.data(), payload.size(), deadline);
}

}  // namespace waco::heuristics::detail
