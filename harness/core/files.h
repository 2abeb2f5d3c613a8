// Files: results are written whole or not at all.
#pragma once

#include <string>

#include "harness/core/status.h"

namespace zb {

// Writes `text` to a temporary file beside `path`, then renames it over `path`: a reader
// sees the old file or the whole new one, never a half-written one.
Status write_file_atomically(const std::string& path, const std::string& text);

// Whether a results file can be written at `path` (its folder exists and is writable, and the
// path is not a folder), so a bad path fails before any benchmark runs, not after them all.
// `flag` names the option in the error: "--json: cannot write /no/such/x.json: ...".
Status check_output_path(const std::string& flag, const std::string& path);

}  // namespace zb
