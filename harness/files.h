// Files: results are written whole or not at all.
#pragma once

#include <string>

#include "harness/status.h"

namespace zb {

// Writes `text` to a temporary file beside `path`, then renames it over `path`: a reader
// sees the old file or the whole new one, never a half-written one.
Status write_file_atomically(const std::string& path, const std::string& text);

}  // namespace zb
