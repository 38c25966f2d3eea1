// Facts kept per boot in the user's cache (boot_facts.hpp).
#include "boot_facts.hpp"

#include <time.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "waco/kernels/context.hpp"
#include "waco/kernels/io.hpp"

namespace waco::kernels::detail {

namespace {

constexpr const char* kFormat = "waco-hybrid machine facts 2";

/// Two readings of the boot's instant agree within this (seconds): they differ only when the
/// wall clock was stepped in between (NTP slews both clocks alike), and then the facts are read
/// from the machine once more; two boots' instants are the first boot's life apart, seconds at
/// the very least.
constexpr double kBootTimeToleranceS = 1.0;

/// The wall-clock instant of this boot (seconds since the epoch); 0 when the clocks cannot be read.
double boot_time() {
  // The wall clock less the time since the boot (suspend included).
  // /proc/sys/kernel/random/boot_id names the boot too, but the kernel makes it at each read:
  // ~35-45 us, a tenth of a small SpMV plan's first step, against two vDSO calls.
  timespec real{}, boot{};
  if (::clock_gettime(CLOCK_REALTIME, &real) != 0 || ::clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
    return 0.0;
  return static_cast<double>(real.tv_sec - boot.tv_sec) +
         1e-9 * static_cast<double>(real.tv_nsec - boot.tv_nsec);
}

std::string facts_path() {
  char host[256] = {};
  std::string name = "machine-facts";
  if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') {
    name += '-';
    for (const char* c = host; *c; ++c)
      name += (std::isalnum(static_cast<unsigned char>(*c)) || *c == '-' || *c == '.') ? *c : '_';
  }
  return user_cache_dir() + "/" + name + ".json";
}

}  // namespace

nlohmann::json boot_fact(const std::string& name, const std::function<nlohmann::json()>& compute,
                         const std::function<bool(const nlohmann::json&)>& valid) {
  static std::mutex mutex;
  static bool read = false;
  static double boot = 0.0;
  static std::string path;
  static nlohmann::json facts = nlohmann::json::object();
  const std::lock_guard<std::mutex> lock(mutex);
  if (!read) {
    read = true;
    boot = boot_time();
    path = facts_path();
    if (boot > 0.0) {
      try {
        const nlohmann::json j = nlohmann::json::parse(read_text_file(path));
        if (j.at("format") == kFormat &&
            std::abs(j.at("boot_time").get<double>() - boot) < kBootTimeToleranceS &&
            j.at("facts").is_object())
          facts = j.at("facts");
      } catch (const std::exception&) {
        // Absent, damaged or of another format: written anew below.
      }
    }
  }
  if (const auto it = facts.find(name); it != facts.end()) {
    try {
      if (valid(*it)) return *it;
    } catch (const std::exception&) {
    }
  }
  nlohmann::json value = compute();
  if (boot <= 0.0) return value;
  facts[name] = value;
  try {
    std::error_code ec;
    std::filesystem::create_directories(user_cache_dir(), ec);
    write_text_file(
        path,
        nlohmann::json{{"format", kFormat}, {"boot_time", boot}, {"facts", facts}}.dump(1) + "\n");
  } catch (const std::exception&) {
    // An unwritable cache: the next process reads the machine again.
  }
  return value;
}

}  // namespace waco::kernels::detail
