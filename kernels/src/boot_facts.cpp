// Facts kept per boot in the user's cache (boot_facts.hpp).
#include "boot_facts.hpp"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "waco/kernels/context.hpp"
#include "waco/kernels/io.hpp"

namespace waco::kernels::detail {

namespace {

constexpr const char* kFormat = "waco-hybrid machine facts 1";

std::string boot_id() {
  std::string id = read_text_file("/proc/sys/kernel/random/boot_id");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
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
  static std::string boot, path;
  static nlohmann::json facts = nlohmann::json::object();
  const std::lock_guard<std::mutex> lock(mutex);
  if (!read) {
    read = true;
    boot = boot_id();
    path = facts_path();
    if (!boot.empty()) {
      try {
        const nlohmann::json j = nlohmann::json::parse(read_text_file(path));
        if (j.at("format") == kFormat && j.at("boot_id") == boot && j.at("facts").is_object())
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
  if (boot.empty()) return value;
  facts[name] = value;
  try {
    std::error_code ec;
    std::filesystem::create_directories(user_cache_dir(), ec);
    write_text_file(path, nlohmann::json{{"format", kFormat}, {"boot_id", boot}, {"facts", facts}}
                              .dump(1) + "\n");
  } catch (const std::exception&) {
    // An unwritable cache: the next process reads the machine again.
  }
  return value;
}

}  // namespace waco::kernels::detail
