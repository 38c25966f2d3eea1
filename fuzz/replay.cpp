// fuzz_replay: runs inputs through a fuzz target's entry function without libFuzzer, in any
// build (the regression corpus tests/corpus/<target>/ under ctest, a crash file from a fuzz run).
//
//   fuzz_replay TARGET PATH...      every file (folders: every file inside, recursively)
//   fuzz_replay --seeds TARGET DIR  writes the target's generated seeds (targets.hpp) into DIR
//   fuzz_replay --list              the targets
//
// Exit status 0 when every input returned normally; an input that crashes or fails a check ends
// the process (the message names the input first). Exit 1 when a path has no file, 2 on usage.
// The address space is limited to WACO_REPLAY_MEMORY_MB (3072) MiB, so that an input which makes
// a reader allocate what its file does not hold fails here as std::bad_alloc, as it fails under
// libFuzzer's memory limit, instead of passing slowly on a large machine.
#include <algorithm>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "targets.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--list") {
    for (const auto& t : waco::fuzz::targets()) std::printf("%-18s %s\n", t.name, t.reads);
    return 0;
  }
  if (args.size() == 3 && args[0] == "--seeds") {
    if (!waco::fuzz::find_target(args[1])) {
      std::fprintf(stderr, "error: unknown fuzz target '%s' (fuzz_replay --list)\n", args[1].c_str());
      return 2;
    }
    std::printf("%d\n", waco::fuzz::write_generated_seeds(args[1], args[2]));
    return 0;
  }
  if (args.size() < 2) {
    std::fprintf(stderr, "usage: fuzz_replay TARGET PATH... | --seeds TARGET DIR | --list\n");
    return 2;
  }
  const waco::fuzz::Target* target = waco::fuzz::find_target(args[0]);
  if (!target) {
    std::fprintf(stderr, "error: unknown fuzz target '%s' (fuzz_replay --list)\n", args[0].c_str());
    return 2;
  }
  std::vector<std::string> files;
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::error_code ec;
    const std::size_t before = files.size();
    if (fs::is_directory(args[i], ec)) {
      for (const auto& e : fs::recursive_directory_iterator(args[i], ec))
        if (e.is_regular_file()) files.push_back(e.path().string());
    } else if (fs::is_regular_file(args[i], ec)) {
      files.push_back(args[i]);
    }
    if (files.size() == before) {
      std::fprintf(stderr, "error: %s: no input files\n", args[i].c_str());
      return 1;
    }
  }
  std::sort(files.begin(), files.end());
  const char* mb = std::getenv("WACO_REPLAY_MEMORY_MB");
  const rlim_t limit = static_cast<rlim_t>(mb && *mb ? std::atoll(mb) : 3072) << 20;
  const rlimit as{limit, limit};
  if (limit > 0 && ::setrlimit(RLIMIT_AS, &as) != 0) std::perror("fuzz_replay: setrlimit");
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "%s: %s (%zu bytes)\n", target->name, f.c_str(), bytes.size());
    std::fflush(stderr);
    target->run(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: %zu inputs replayed, all returned normally\n", target->name, files.size());
  return 0;
}
