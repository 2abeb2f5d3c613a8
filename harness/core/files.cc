// Files: atomic writes through a temporary file and rename(2).
#include "harness/core/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace zb {

Status write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::error("cannot write " + tmp + ": " + std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::error("cannot write " + path + ": " + why);
  }
  return Status::ok();
}

Status check_output_path(const std::string& flag, const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(flag + ": cannot write " + path + ": folder " + dir + " does not exist");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return Status::error(flag + ": cannot write " + path + ": folder " + dir + " is not writable");
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::error(flag + ": " + path + " is a folder, not a file");
  return Status::ok();
}

}  // namespace zb
