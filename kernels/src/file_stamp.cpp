#include "waco/kernels/file_stamp.hpp"

#include <sys/stat.h>

namespace waco::kernels {

namespace {

std::optional<FileStamp> stamp(const std::string& path, bool regular_only) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (regular_only && !S_ISREG(st.st_mode)))
    return std::nullopt;
  return FileStamp{st.st_dev, st.st_ino, st.st_size,
                   static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

}  // namespace

std::optional<FileStamp> file_stamp(const std::string& path) { return stamp(path, false); }
std::optional<FileStamp> regular_file_stamp(const std::string& path) {
  return stamp(path, true);
}

}  // namespace waco::kernels
