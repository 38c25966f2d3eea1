// waco-measure-worker: the measurement worker as a program of its own (measure_internal.hpp),
// started by a Measurer with posix_spawn, never by hand. Installed in <libexecdir>/waco-hybrid.
//   waco-measure-worker --socket-fd 3 --parent PID
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "measure_internal.hpp"

int main(int argc, char** argv) {
  int fd = 3;
  pid_t parent = ::getppid();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--socket-fd") == 0) fd = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--parent") == 0) parent = static_cast<pid_t>(std::atol(argv[i + 1]));
  }
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    std::fprintf(stderr,
                 "waco-measure-worker: a helper of waco-hybrid, which starts it to measure kernels "
                 "(no socket on fd %d: it is not run by hand)\n", fd);
    return 2;
  }
  waco::heuristics::detail::worker_main(fd, parent);
}
